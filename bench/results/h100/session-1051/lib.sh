# sourced: B (bundle), O (output), sec NAME TIMEOUT cmd...
B=/tmp/b
O=/tmp/r
mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
sec() {
  _n=$1; _t=$2; shift 2
  s=$(date +%s)
  timeout $_t "$@" > $O/$_n.txt 2>&1
  rc=$?
  echo "== $_n rc $rc $(( $(date +%s) - s )) s" | tee -a $O/status.txt
}
pack() { tar czf $OUT/r$1.tgz -C $O . ; }
