#!/usr/bin/env bash
# The project stands alone: every file a comment or a document cites exists in the repository,
# and every requirement id (S0-n, S3-n) it cites is defined in docs/requirements.md. Run by .ci/run.
# Exit 0 when all citations resolve; 1 naming each one that does not.
set -euo pipefail
cd "$(dirname "$0")/.."

# What is read: tracked sources, scripts and documents (not third-party folders).
mapfile -t files < <(git ls-files -- src tests bench scripts docs web examples fuzz cmake deploy \
  api packaging README.md CMakeLists.txt '*.md' |
  grep -v -e '/node_modules/' -e 'package-lock.json$' -e '\.png$' -e '^scripts/check-citations.sh$' |
  sort -u)

failures=0
fail() {
  echo "check-citations: $1" >&2
  failures=$((failures + 1))
}

# 1. Documents outside the repository are never cited.
while IFS= read -r hit; do
  fail "cites a document outside the repository: $hit"
done < <(grep -nE '\.\./shared|shared/DESIGN|(^|[^/a-z_])DESIGN\.md|REQUIREMENTS\.md' "${files[@]}" || true)

# 2. Requirement ids are defined in docs/requirements.md (as "**S0-1 — ...").
defined=$(grep -oE '^\*\*S[03]-[0-9]+ ' docs/requirements.md | tr -d '* ' | sort -u)
while IFS=: read -r file line id; do
  grep -qx -- "$id" <<<"$defined" || fail "$file:$line cites $id, which docs/requirements.md does not define"
done < <(grep -noE '\bS[03]-[0-9]+\b' "${files[@]}" | grep -v '^docs/requirements.md:' || true)

# 3. Cited repository files exist (a path with an extension; a glob must match something).
#    Paths under build/ and data directories are produced at run time and not checked.
prefixes='src|tests|docs|scripts|bench|web|cmake|examples|fuzz|deploy|api|packaging'
while IFS=: read -r file line path; do
  path=${path%.}  # a path that ends a sentence
  path=${path%,}
  case "$path" in
    *'<'* | *'{'* | *'$'* | */) continue ;;  # a pattern or a folder named by a placeholder
  esac
  [[ "${path##*/}" == *.* ]] || continue  # a folder or a URL path, not a file
  if [[ "$path" == *'*'* ]]; then
    compgen -G "$path" >/dev/null || fail "$file:$line cites $path, which matches no file"
  elif [ ! -e "$path" ]; then
    fail "$file:$line cites $path, which does not exist"
  fi
done < <(grep -noE "(^|[^A-Za-z0-9_./-])($prefixes)/[A-Za-z0-9_.*/-]*[A-Za-z0-9_*]" "${files[@]}" |
  sed -E "s#^([^:]+):([0-9]+):[^a-z]?#\1:\2:#")

if [ "$failures" -gt 0 ]; then
  echo "check-citations: $failures citation(s) do not resolve" >&2
  exit 1
fi
echo "check-citations: every cited file and requirement id exists"
