/* rumus-bench - placeholder until the benchmark lands. */
#include <stdio.h>
int main(void) {
  fprintf(stderr, "rumus-bench: not built yet\n");
  return 1;
}
