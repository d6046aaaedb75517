#!/bin/bash
# Mutation run of one module: ./run.sh MODULE COPY [PYTHON]
#
# MODULE: a path listed in modules.txt (e.g. rope_ref/scaling/_yarn.py). COPY: a copy of the
# repository made for the run (git archive HEAD | tar -x -C COPY), which Cosmic Ray edits.
# PYTHON: an interpreter with rope-ref's test extras, cosmic-ray and coverage installed
# (cosmic-ray and cr-filter-operators must be on PATH).
# Writes COPY/mutation/NAME.{toml,sqlite,json,json.src,log}; prints the score.
set -eu
module=$1; copy=$(cd "$2" && pwd); python=${3:-python}
here=$(cd "$(dirname "$0")" && pwd)
entry=$(grep "^$module |" "$here/modules.txt") || { echo "$module is not in modules.txt" >&2; exit 2; }
xp=$(echo "$entry" | cut -d'|' -f2 | tr -d ' ')
tests=$(echo "$entry" | cut -d'|' -f3- | sed 's/^ *//; s/ *$//')
name=$(echo "$module" | sed 's#^rope_ref/##; s#\.py$##; s#/#.#g')
out=$copy/mutation; mkdir -p "$out"
sock=$out/$name.sock
envs="CI=true"; [ -n "$xp" ] && envs="$envs ROPE_REF_XP=$xp"

cd "$copy"
"$python" "$here/forkserver.py" "$copy" "$sock" > "$out/$name.server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
until grep -q ready "$out/$name.server.log" 2>/dev/null; do sleep 1; done

# 1. Which test executes which line (all tests must pass on the unmutated code).
cp "$module" "$out/$name.json.src"
eval "args=($tests)"  # the -k expression of modules.txt is quoted as in a shell
env $envs MUTATION_MAP_OUT="$out/$name.json" "$python" "$here/run_tests.py" "$sock" - "$module" -- "${args[@]}" \
  || { echo "the tests fail on the unmutated code" >&2; exit 1; }

# 2. The session: every mutant of the chosen operators.
cat > "$out/$name.toml" <<CONF
[cosmic-ray]
module-path = "$module"
timeout = 300.0
excluded-modules = []
test-command = "env $envs $python $here/run_tests.py $sock $out/$name.json $module -- $tests"
[cosmic-ray.distributor]
name = "local"
[cosmic-ray.filters.operators-filter]
exclude-operators = [
  "core/ReplaceBinaryOperator_(?!(Add_Sub|Sub_Add|Mul_Div|Div_Mul|FloorDiv_Div|Div_FloorDiv|Pow_Mul|Mod_FloorDiv)\$).*",
  "core/ReplaceComparisonOperator_(?!(Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Eq_NotEq|NotEq_Eq|Is_IsNot|IsNot_Is|Lt_Gt|Gt_Lt|LtE_GtE|GtE_LtE|In_NotIn|NotIn_In)\$).*",
]
CONF
rm -f "$out/$name.sqlite"
cosmic-ray init "$out/$name.toml" "$out/$name.sqlite"
cr-filter-operators "$out/$name.sqlite" "$out/$name.toml"
cosmic-ray exec "$out/$name.toml" "$out/$name.sqlite" > "$out/$name.log" 2>&1
"$python" "$here/report.py" "$out/$name.sqlite"
