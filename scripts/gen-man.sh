#!/bin/sh
# gen-man.sh - the reference pages, generated from the public header so
# that header and pages never disagree.
#
#   scripts/gen-man.sh HEADER README VERSION OUTDIR
#
# Writes OUTDIR/<function>.3 for every function the header declares with
# RUMUS_API, from the "/*! name() : ..." comment above its declaration (a
# comment serves every declaration that follows it directly, as for
# rumus_f32_to_f16() and kin), and OUTDIR/rumus.7: the header's opening
# comment (objects, errors, execution, threads), the status codes of
# RUMUS_ERRNO_MAP and README's "Environment variables".  Only POSIX sh and
# awk: it runs on every build machine.  Exits non-zero, naming it, when a
# declaration has no such comment.
set -eu
header=$1
readme=$2
version=$3
out=$4
mkdir -p "$out"

# ---- One page per function ---------------------------------------------
awk -v out="$out" -v version="$version" '
# groff-safe text: backslashes, and a leading dot or quote.
function esc(s) {
  gsub(/\\/, "\\e", s)
  if (s ~ /^[.\047]/) s = "\\&" s
  return s
}
function page(name, decl,    f, up, summary, body, ret, n, i, line, pre) {
  f = out "/" name ".3"
  up = toupper(name)
  # The doc: "name() : summary..." or "a() / b() :" then the text; the
  # part from "@return" on is the RETURN VALUE section.
  body = doc
  sub(/^[^:]*\(\)[^:]*:[ \t]*/, "", body)
  ret = ""
  i = index(body, "@return")
  if (i > 0) {
    ret = substr(body, i + 7)
    body = substr(body, 1, i - 1)
  }
  summary = body
  gsub(/\n/, " ", summary)
  sub(/^[ \t]+/, "", summary)
  if (match(summary, /[.;:]( |$)/)) summary = substr(summary, 1, RSTART - 1)
  if (length(summary) > 70) summary = substr(summary, 1, 67) "..."
  if (summary == "") summary = "see DESCRIPTION"
  printf ".TH %s 3 \"\" \"rumus %s\" \"rumus manual\"\n.nh\n", up, version > f
  printf ".SH NAME\n%s \\- %s\n", name, esc(summary) > f
  printf ".SH SYNOPSIS\n.nf\n.B #include <rumus.h>\n.PP\n%s\n.fi\n", esc(decl) > f
  printf ".SH DESCRIPTION\n" > f
  emit(body, f, 1)
  if (ret != "") {
    printf ".SH RETURN VALUE\n" > f
    emit(ret, f, 0)
  }
  printf ".SH SEE ALSO\n.BR rumus (7)\n" > f
  close(f)
}
# Text lines, filled; with verbatim set, indented ones (formulas, tables)
# are kept as they are.  Blank lines start paragraphs, none at the end.
function emit(text, f, verbatim,    n, lines, i, l, verb) {
  sub(/[ \t\n]+$/, "", text)
  n = split(text, lines, "\n")
  verb = 0
  for (i = 1; i <= n; i++) {
    l = lines[i]
    if (l ~ /^[ \t]*$/) { if (verb) { print ".fi" > f; verb = 0 } print ".PP" > f; continue }
    if (verbatim && l ~ /^   /) {
      if (!verb) { print ".nf" > f; verb = 1 }
    } else if (verb) {
      print ".fi" > f
      verb = 0
    }
    sub(/^[ \t]+/, "", l)
    print esc(l) > f
  }
  if (verb) print ".fi" > f
}
# The text of a comment line: no "/*!", " *", "*/", and one leading space
# less (the header indents its doc text by one after " * ").
function strip(l) {
  sub(/^[ \t]*\/\*!?[ \t]?/, "", l)
  sub(/^[ \t]*\*\/[ \t]*$/, "", l)
  sub(/[ \t]*\*\/[ \t]*$/, "", l)
  sub(/^[ \t]*\*( |$)/, "", l)
  sub(/^ /, "", l)
  return l
}
BEGIN { doc = ""; valid = 0; incomment = 0; indecl = 0; missing = 0 }
indecl {
  decl = decl " " $0
  if ($0 ~ /;/) { finish(); }
  next
}
incomment {
  if (isdoc) doc = doc "\n" strip($0)
  if ($0 ~ /\*\//) { incomment = 0; if (isdoc) valid = 1 }
  next
}
/^[ \t]*\/\*!/ {
  isdoc = 1; doc = strip($0); valid = 0
  if ($0 ~ /\*\/[ \t]*$/) valid = 1; else incomment = 1
  next
}
/^[ \t]*\/\*/ {
  isdoc = 0
  if ($0 !~ /\*\//) incomment = 1
  next
}
/^RUMUS_API/ {
  decl = $0
  if ($0 ~ /;/) finish(); else indecl = 1
  next
}
/^[ \t]*$/ { next }
{ valid = 0 }
function finish(    name, d) {
  indecl = 0
  d = decl
  sub(/^RUMUS_API[ \t]+/, "", d)
  gsub(/[ \t]+/, " ", d)
  gsub(/\( /, "(", d)
  name = d
  sub(/\(.*/, "", name)
  sub(/.*[ *]/, "", name)
  if (!valid) {
    printf "gen-man.sh: %s has no /*! comment above its declaration\n", name > "/dev/stderr"
    missing++
    return
  }
  page(name, d)
}
END { if (missing) exit 1 }
' "$header"

# ---- rumus(7) -------------------------------------------------------------
{
  printf '.TH RUMUS 7 "" "rumus %s" "rumus manual"\n.nh\n' "$version"
  printf '.SH NAME\nrumus \\- OpenCL C kernels for training neural networks\n'
  printf '.SH SYNOPSIS\n.nf\n.B #include <rumus.h>\n.PP\ncc ... $(pkg-config \\-\\-cflags \\-\\-libs rumus)\n.fi\n'
  # The header's opening comment: headings at one space, text below them.
  awk '
    NR == 1 { next }
    /^ \*\// { exit }
    {
      l = $0
      sub(/^ \*/, "", l)
      gsub(/\\/, "\\e", l)
      if (l ~ /^ [A-Z][a-z]+$/) { sub(/^ /, "", l); print ".SH " toupper(l); next }
      if (l ~ /^[ \t]*$/) { print ".PP"; next }
      if (l ~ /^     /) { sub(/^[ \t]+/, "", l); print ".br"; print l; next }
      sub(/^[ \t]+/, "", l)
      if (l ~ /^[.\047]/) l = "\\&" l
      print l
    }' "$header"
  printf '.SH STATUS CODES\n'
  awk '
    /XX\([A-Z]+, -?[0-9]+, "/ {
      s = $0
      sub(/.*XX\(/, "", s)
      name = s; sub(/,.*/, "", name)
      val = s; sub(/^[A-Z]+, /, "", val); sub(/,.*/, "", val)
      msg = s; sub(/^[^"]*"/, "", msg); sub(/".*/, "", msg)
      printf ".TP\n.B RUMUS_%s (%s)\n%s\n", name, val, msg
    }' "$header"
  printf '.SH ENVIRONMENT\n'
  awk '
    /^Environment variables$/ { on = 1; getline; next }
    on && /^[A-Z][a-z ]+$/ { exit }
    on && /^[A-Z][A-Z0-9_]*[ ,]/ {
      # the name (with its ", _SUFFIX" siblings) ends at two spaces
      n = $0; sub(/  .*/, "", n); sub(/^[^ ]*(, [^ ]+)*[ \t]+/, "")
      printf ".TP\n.B %s\n%s\n", n, $0; next
    }
    on && /^[ \t]+[^ \t]/ { sub(/^[ \t]+/, ""); print; next }
  ' "$readme"
  printf '.SH SEE ALSO\nThe page of each function, e.g.\n.BR rumus_ctx_create (3),\n'
  printf '.BR rumus_cross_entropy (3);\nREADME and docs/ in the source tree.\n'
} > "$out/rumus.7"
