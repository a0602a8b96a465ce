# RUMUS_CHECK_CFLAGS(VAR, FLAGS): append to VAR each flag of FLAGS the C compiler accepts.
AC_DEFUN([RUMUS_CHECK_CFLAGS], [
  for rumus_flag in $2; do
    AC_MSG_CHECKING([whether $CC accepts $rumus_flag])
    rumus_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -Werror $rumus_flag"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
      [AC_MSG_RESULT([yes]); $1="$$1 $rumus_flag"], [AC_MSG_RESULT([no])])
    CFLAGS=$rumus_save_CFLAGS
  done
])

# RUMUS_CHECK_PTHREAD: POSIX threads through -pthread (glibc and every compiler we target accept it).
AC_DEFUN([RUMUS_CHECK_PTHREAD], [
  AC_MSG_CHECKING([whether $CC accepts -pthread])
  rumus_save_CFLAGS=$CFLAGS
  CFLAGS="$CFLAGS -pthread"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <pthread.h>]], [[pthread_mutex_t m; pthread_mutex_init(&m, 0);]])],
    [AC_MSG_RESULT([yes]); PTHREAD_CFLAGS=-pthread], [AC_MSG_RESULT([no]); AC_MSG_ERROR([POSIX threads are required])])
  CFLAGS=$rumus_save_CFLAGS
  AC_SUBST([PTHREAD_CFLAGS])
])
