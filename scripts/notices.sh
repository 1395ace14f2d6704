#!/usr/bin/env bash
# Writes the notices of what libpbs (pbs-ffi) links in to DIR/THIRD-PARTY.md: each crate
# compiled into it (its normal dependencies without procedural macros, which run only at build
# time), with its licence, its repository and the text of every licence file its source ships
# (each text once, with the crates that ship it); then Rust's standard library, whose notices go
# to DIR/COPYRIGHT-library.html (from the toolchain that builds the library). A crate whose
# licence names an identifier outside ALLOWED is an error, as is a crate whose source is not in
# cargo's registry: the static library would carry terms this file does not give.
#
#   scripts/notices.sh DIR        (scripts/install.sh: PREFIX/share/doc/pbs)
set -euo pipefail
dir=$(realpath -m -- "${1:?usage: scripts/notices.sh DIR}") # the caller's folder, if relative
cd "$(dirname "$0")/.."
mkdir -p "$dir"
out="$dir/THIRD-PARTY.md"

# Permissive licences, whose terms are notices kept with the copies.
ALLOWED="MIT Apache-2.0 BSD-2-Clause BSD-3-Clause ISC Zlib Unicode-3.0 Unicode-DFS-2016"
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"

texts=$(mktemp -d)
trap 'rm -rf "$texts"' EXIT
{
    echo "# Third-party code in libpbs"
    echo
    echo "libpbs.so and libpbs.a contain, besides pbs's own crates (MIT OR Apache-2.0: LICENSE-MIT,"
    echo "LICENSE-APACHE), the following crates and Rust's standard library. Each crate's licence"
    echo "is as its manifest states it; the texts its source ships follow the list."
    echo
    echo "| crate | version | licence | repository |"
    echo "|---|---|---|---|"
} >"$out"
crates=0
while IFS='|' read -r package licence repository; do
    read -r name version path <<<"$package"
    [ -n "$path" ] && continue # a crate of this workspace
    version=${version#v}
    for id in $(tr '()/' '   ' <<<"$licence" | sed 's/ OR / /g; s/ AND / /g; s/ WITH [^ ]*//g'); do
        case " $ALLOWED " in
        *" $id "*) ;;
        *) echo "error: $name $version is under '$licence': '$id' is not among the licences allowed in libpbs ($ALLOWED)" >&2; exit 1 ;;
        esac
    done
    source_dir=$(find "$registry" -mindepth 2 -maxdepth 2 -type d -name "$name-$version" -print -quit 2>/dev/null || true)
    if [ -z "$source_dir" ]; then
        echo "error: the source of $name $version is not under $registry: its licence files cannot be copied (cargo fetch first)" >&2
        exit 1
    fi
    echo "| $name | $version | $licence | ${repository:-—} |" >>"$out"
    shipped=0
    while IFS= read -r file; do
        sum=$(sha256sum "$file" | cut -c1-16)
        [ -f "$texts/$sum" ] || cp "$file" "$texts/$sum"
        echo "$name $version ($(basename "$file"))" >>"$texts/$sum.by"
        shipped=$((shipped + 1))
    done < <(find "$source_dir" -maxdepth 1 -type f \( -iname 'LICEN[CS]E*' -o -iname 'COPYING*' -o -iname 'COPYRIGHT*' -o -iname 'NOTICE*' \) | sort)
    if [ "$shipped" = 0 ]; then
        echo "$name $version" >>"$texts/none"
    fi
    crates=$((crates + 1))
done < <(cargo tree -p pbs-ffi -e normal,no-proc-macro --prefix none --format '{p}|{l}|{r}' | sed 's/ (\*)$//' | sort -u)
# A failed `cargo tree` gives the loop nothing, which must not read as a library without crates.
[ "$crates" -gt 0 ] || { echo "error: cargo tree listed no crate of pbs-ffi" >&2; exit 1; }

{
    echo
    std_notices="$(rustc --print sysroot)/share/doc/rust/COPYRIGHT-library.html"
    if [ -f "$std_notices" ]; then
        cp "$std_notices" "$dir/COPYRIGHT-library.html"
        echo "Rust's standard library, linked in: MIT OR Apache-2.0, with the notices of the code it"
        echo "contains in COPYRIGHT-library.html beside this file (from the toolchain that built it)."
    else
        echo "Rust's standard library, linked in: MIT OR Apache-2.0; the toolchain that built it had no"
        echo "COPYRIGHT-library.html: its notices are in the COPYRIGHT file of Rust's sources."
    fi
    if [ -f "$texts/none" ]; then
        echo
        echo "These crates ship no licence file in their source; their licence is the one stated above:"
        sed 's/^/- /' "$texts/none"
    fi
    # Each text once, in the order of the first crate that ships it.
    for by in $(for f in "$texts"/*.by; do echo "$(head -1 "$f")|$f"; done | sort | cut -d'|' -f2); do
        echo
        echo "## Shipped by $(paste -sd, "$by" | sed 's/,/, /g')"
        echo
        echo '```text'
        cat "${by%.by}"
        [ -z "$(tail -c1 "${by%.by}")" ] || echo
        echo '```'
    done
} >>"$out"
echo "$crates crates listed in $out" >&2
