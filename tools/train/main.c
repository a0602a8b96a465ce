/* rumus-train - placeholder until the training program lands. */
#include <stdio.h>
int main(void) {
  fprintf(stderr, "rumus-train: not built yet\n");
  return 1;
}
