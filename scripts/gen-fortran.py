#!/usr/bin/env python3
"""gen-fortran.py - the Fortran 2008 interface module rumus_c, generated
from the public header so that it covers the whole C API:

    python3 scripts/gen-fortran.py include/rumus.h > fortran/rumus_c.f90

It writes: the status codes of RUMUS_ERRNO_MAP and every enumerator and
integer #define of rumus.h as integer(c_int) named constants; every struct
typedef as a bind(C) derived type, with the header's RUMUS_*_DEFAULTS as
named constants of that type; and a bind(C) interface for every RUMUS_API
function.  C pointers to rumus_ctx, rumus_tensor, OpenCL objects and void
are type(c_ptr) by value; a pointer to a struct is the derived type by
reference, optional where the C function takes NULL for defaults (const);
const pointers to numbers are assumed-size arrays, other pointers to
numbers scalars written by the call (arrays for dst and buf); const char *
is a NUL-terminated character array, optional (NULL).  The hand-written
module rumus (fortran/rumus.f90) adds the Fortran-friendly wrappers.
tests/fortran-fresh.sh checks that the committed file is this script's
output for the committed header.
"""
import re
import sys

SCALARS = {
    "float": "real(c_float)", "double": "real(c_double)",
    "int": "integer(c_int)", "unsigned": "integer(c_int)",
    "size_t": "integer(c_size_t)", "long": "integer(c_long)",
    "uint64_t": "integer(c_int64_t)", "int64_t": "integer(c_int64_t)",
    "int32_t": "integer(c_int32_t)", "uint32_t": "integer(c_int32_t)",
    "uint16_t": "integer(c_int16_t)", "cl_int": "integer(c_int32_t)",
    "char": "character(kind=c_char)",
}
HANDLES = {"rumus_ctx", "rumus_tensor", "cl_mem", "cl_context", "cl_device_id",
           "cl_command_queue", "void"}
ARRAY_OUT = {"dst", "buf"}


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def parse(text):
    code = strip_comments(text)
    enums, structs, defaults, decls = [], {}, [], []
    for m in re.finditer(r"XX\((\w+),\s*(-?\d+),", text):
        enums.append(("RUMUS_" + m.group(1), m.group(2)))
    for m in re.finditer(r"(?:typedef\s+)?enum\s*\{([^}]*)\}\s*(\w*)\s*;", code):
        if "#" in m.group(1):  # the status enum, generated from the map
            continue
        value = -1
        for item in m.group(1).split(","):
            item = item.strip()
            if not item or "RUMUS_ERRNO_MAP" in item or "(" in item:
                continue
            name, _, v = item.partition("=")
            value = int(v.strip(), 0) if v.strip() else value + 1
            enums.append((name.strip(), str(value)))
    for m in re.finditer(r"^#define\s+(RUMUS_[A-Z0-9_]+)\s+(\d+)u?\s*$", code, re.M):
        enums.append((m.group(1), m.group(2)))
    for m in re.finditer(r"typedef\s+struct\s*\{([^}]*)\}\s*(\w+)\s*;", code):
        fields = []
        for decl in m.group(1).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            tm = re.match(r"((?:const\s+)?[\w ]*?[\w]+)\s*(\**)\s*(\w+(?:\s*,\s*\w+)*)"
                          r"(?:\[(\w+)\])?$", decl)
            ctype, stars, names, dim = tm.group(1), tm.group(2), tm.group(3), tm.group(4)
            for n in names.split(","):
                name = n.strip() + ("(%s)" % dim if dim else "")
                fields.append((ctype.replace("const ", "").strip(), stars, name))
        structs[m.group(2)] = fields
    for m in re.finditer(r"^#define\s+(RUMUS_\w+_DEFAULTS)\s+\{([^}]*)\}", code, re.M):
        defaults.append((m.group(1), [v.strip() for v in m.group(2).split(",")]))
    for m in re.finditer(r"RUMUS_API\s+([^;(]*?)\s*(\**)\s*(\w+)\s*\(([^)]*)\)\s*;", code):
        decls.append((m.group(1).strip(), m.group(2), m.group(3), m.group(4)))
    return enums, structs, defaults, decls


def ftype_of(ctype, structs, enum_types):
    if ctype in SCALARS:
        return SCALARS[ctype]
    if ctype in enum_types:
        return "integer(c_int)"
    if ctype in structs:
        return "type(%s)" % ctype
    return None


def field_line(ctype, stars, name, structs, enum_types):
    if stars or ctype in HANDLES:
        return "    type(c_ptr) :: %s" % name
    return "    %s :: %s" % (ftype_of(ctype, structs, enum_types), name)


def param_lines(params, structs, enum_types, used):
    """(dummy names, declaration lines) of one C parameter list."""
    names, lines = [], []
    if params.strip() in ("", "void"):
        return names, lines
    for p in params.split(","):
        p = " ".join(p.replace("*", " * ").split())
        is_const = p.startswith("const ")
        array_of_ptrs = "* const *" in p
        arr = re.search(r"\[(\d+)\]$", p)
        p = re.sub(r"\[\d+\]$", "", p)
        toks = p.replace("const ", "").split()
        name, stars = toks[-1], toks.count("*")
        base = [t for t in toks[:-1] if t != "*"][0]
        fname = name if name.lower() not in used else name + "_"
        used.add(fname.lower())
        names.append(fname)
        if base in HANDLES or array_of_ptrs:
            if array_of_ptrs:
                lines.append("type(c_ptr), intent(in) :: %s(*)" % fname)
            elif stars >= 2:
                lines.append("type(c_ptr), intent(out) :: %s" % fname)
            else:
                lines.append("type(c_ptr), value :: %s" % fname)
        elif base == "char":
            lines.append("character(kind=c_char), intent(%s)%s :: %s(*)"
                         % ("in" if is_const else "out", ", optional" if is_const else "", fname))
        elif base in structs and stars and re.search(r"\bcap\b", params):
            lines.append("type(%s), intent(out) :: %s(*)" % (base, fname))
        elif base in structs:
            lines.append("type(%s), intent(%s)%s :: %s"
                         % (base, "in" if is_const else "out", ", optional" if is_const else "", fname))
        else:
            ft = ftype_of(base, structs, enum_types)
            if stars == 0 and not arr:
                lines.append("%s, value :: %s" % (ft, fname))
            elif arr:
                lines.append("%s, intent(out) :: %s(%s)" % (ft, fname, arr.group(1)))
            elif is_const or name in ARRAY_OUT:
                lines.append("%s, intent(%s) :: %s(*)" % (ft, "in" if is_const else "out", fname))
            else:
                lines.append("%s, intent(out) :: %s" % (ft, fname))
    return names, lines


def result_type(ret, stars, structs, enum_types):
    if ret == "void" and not stars:
        return None
    if stars or ret.replace("const ", "") in HANDLES:
        return "type(c_ptr)"
    return ftype_of(ret.replace("const ", ""), structs, enum_types)


def fortran_value(v, enum_names):
    v = v.strip()
    if v in enum_names:
        return v
    if re.match(r"^-?\d+$", v):
        return v
    f = re.match(r"^(-?[\d.]+(?:e[-+]?\d+)?)f$", v)
    if f:
        num = f.group(1)
        if "." not in num and "e" not in num:
            num += ".0"
        return num + "_c_float"
    raise ValueError("cannot translate default value %r" % v)


def emit(enums, structs, defaults, decls, out):
    w = out.write
    enum_types = set(re.findall(r"\}\s*(\w+)\s*;", ""))
    w("! rumus_c.f90 - generated by scripts/gen-fortran.py from include/rumus.h;\n"
      "! do not edit.  Named constants, bind(C) types and interfaces of the whole\n"
      "! C API; see fortran/rumus.f90 for the Fortran-friendly wrappers.\n"
      "module rumus_c\n  use, intrinsic :: iso_c_binding\n  implicit none\n  public\n\n")
    seen = set()
    for name, value in enums:
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        w("  integer(c_int), parameter :: %s = %s\n" % (name, value))
    w("\n")
    enum_names = {n for n, _ in enums}
    for sname, fields in structs.items():
        w("  type, bind(C) :: %s\n" % sname)
        for ctype, stars, fname in fields:
            w(field_line(ctype, stars, fname, structs, ENUM_TYPES) + "\n")
        w("  end type %s\n\n" % sname)
    for dname, values in defaults:
        sname = "rumus_" + dname[len("RUMUS_"):-len("_DEFAULTS")].lower() + "_params"
        if sname not in structs:
            continue
        vals = ", ".join(fortran_value(v, enum_names) for v in values)
        w(wrap("  type(%s), parameter :: %s = %s(%s)" % (sname, dname, sname, vals)) + "\n")
    w("\n  interface\n")
    for ret, stars, fname, params in decls:
        used = {fname.lower()}
        names, lines = param_lines(params, structs, ENUM_TYPES, used)
        rt = result_type(ret, stars, structs, ENUM_TYPES)
        kind = "function" if rt else "subroutine"
        head = "    %s %s(%s) bind(C, name=\"%s\")" % (kind, fname, ", ".join(names), fname)
        w(wrap(head) + "\n      import\n      implicit none\n")
        for l in lines:
            w(wrap("      " + l) + "\n")
        if rt:
            w("      %s :: %s\n" % (rt, fname))
        w("    end %s %s\n" % (kind, fname))
    w("  end interface\nend module rumus_c\n")


def wrap(line, width=100):
    """Fortran free form: continue long lines with &."""
    out = []
    while len(line) > width:
        cut = line.rfind(", ", 0, width - 2) + 1
        out.append(line[:cut] + " &")
        line = "        " + line[cut:].lstrip()
    out.append(line)
    return "\n".join(out)


ENUM_TYPES = set()


def main():
    text = open(sys.argv[1]).read()
    code = strip_comments(text)
    ENUM_TYPES.update(re.findall(r"typedef\s+enum\s*\{[^}]*\}\s*(\w+)\s*;", code))
    emit(*parse(text), sys.stdout)


if __name__ == "__main__":
    main()
