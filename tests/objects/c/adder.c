/* The uprobe test's target (gcc-built): calls add() with known arguments. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int add(int a, int b)
{
	__asm__ volatile("" ::: "memory");
	return a + b;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	int sum = 0;
	for (int i = 1; i <= n; i++)
		sum += add(i, 100);
	printf("%d\n", sum);
	return 0;
}
