// C++ workload for the stack tests: mangled names that c++filt demangles.
// Usage: cxx_workload N -- calls shapes::Circle::area(int) N times through
// a template, so user stacks hold namespaced, templated frames.
#include <cstdio>
#include <cstdlib>

namespace shapes {
struct Circle {
	__attribute__((noinline)) long area(int r) const { return 3 * r * r; }
};
}  // namespace shapes

template <typename T>
__attribute__((noinline)) long measure(const T &shape, int r)
{
	return shape.area(r);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10, sum = 0;
	shapes::Circle c;
	for (long i = 0; i < n; i++)
		sum += measure(c, (int)i);
	printf("total %ld\n", sum);
	return 0;
}
