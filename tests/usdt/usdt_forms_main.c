/* usdt_forms_main.c: driver for usdt_forms built as a shared library
 * (libusdt_forms.so, -DUSDT_FORMS_LIB).  Same usage and output as the
 * executable built from usdt_forms.c alone: usdt_forms [ROUNDS [DELAY_MS]].
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void usdt_forms_round(int round);

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1;
	int delay_ms = argc > 2 ? atoi(argv[2]) : 0;
	if (getenv("USDT_FORMS_WAIT")) {
		char line[64];
		printf("ready %ld\n", (long)getpid());
		fflush(stdout);
		if (!fgets(line, sizeof line, stdin))
			return 1;
	}
	for (int r = 0; r < rounds; r++) {
		usdt_forms_round(r);
		if (delay_ms > 0 && r + 1 < rounds) {
			struct timespec ts = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
