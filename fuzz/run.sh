#!/usr/bin/env bash
# Builds every cargo-fuzz target and runs each for a fixed time, seeded with the recordings.
#
#   bash fuzz/run.sh            # 20 seconds per target (what CI runs)
#   bash fuzz/run.sh 600        # ten minutes per target, before a release or after a parser change
#   bash fuzz/run.sh 60 sse     # only the named targets
#
# Stable Rust is enough: the targets build with `--sanitizer none` (libFuzzer's coverage
# instrumentation without AddressSanitizer; the code under test is safe Rust, so the findings that
# matter are panics, which need no sanitizer). cargo-fuzz itself is installed, pinned, into a cache
# folder outside the repository (${AGENT_API_TOOLS_DIR:-$HOME/.cache/agent_api/tools}).
# A target that panics fails the script, and leaves its input under fuzz/artifacts/<target>/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
seconds="${1:-20}"
shift || true

cargo_fuzz_version="0.13.1"
tools="${AGENT_API_TOOLS_DIR:-$HOME/.cache/agent_api/tools}/cargo-fuzz-$cargo_fuzz_version"
if [ ! -x "$tools/bin/cargo-fuzz" ]; then
  echo "fuzz: installing cargo-fuzz $cargo_fuzz_version into $tools"
  cargo install cargo-fuzz --locked --version "$cargo_fuzz_version" --root "$tools" --quiet
fi
export PATH="$tools/bin:$PATH"

cd "$here"
all_targets=(line_framer sse jsonrpc parser_scripted parser_claude_code parser_codex parser_opencode
  parser_gemini parser_qwen parser_acp parser_amp)
targets=("${@:-${all_targets[@]}}")

# Recordings each parser target starts from (folders under tests/fixtures).
seed_folders() {
  case "$1" in
    parser_claude_code) echo claude_code handwritten ;;
    parser_codex) echo codex ;;
    parser_opencode) echo opencode ;;
    parser_gemini) echo gemini ;;
    parser_qwen) echo gemini/acp ;;
    parser_acp) echo gemini/acp opencode/acp ;;
    parser_amp) echo amp ;;
  esac
}

# One corpus entry per 8 lines of a recording, behind the byte that picks its format (0: a CLI's
# stdout, 1: a session recording), so the fuzzer mutates real shapes, a few messages at a time.
seed() {
  local target="$1" corpus="$here/corpus/$1" folder file chunk
  shopt -s nullglob
  mkdir -p "$corpus"
  for folder in $(seed_folders "$target"); do
    while IFS= read -r -d '' file; do
      local format='\x00'
      [[ "$file" == *.session.jsonl ]] && format='\x01'
      local prefix="$corpus/seed-$(basename "$file" .jsonl)-"
      split -l 8 -d -a 4 "$file" "$prefix"
      for chunk in "$prefix"*; do
        { printf "$format"; cat "$chunk"; } > "$chunk.in" && mv "$chunk.in" "$chunk"
      done
    done < <(find "$here/../tests/fixtures/$folder" -name '*.jsonl' -print0)
  done
}

cargo fuzz build --sanitizer none -O
# The targets' logs: here whatever CARGO_TARGET_DIR says (the fuzz build may go elsewhere).
mkdir -p "$here/target"
failed=()
for target in "${targets[@]}"; do
  rm -rf "$here/corpus/$target/seed-"*
  seed "$target"
  echo "fuzz: $target for ${seconds}s"
  if ! cargo fuzz run --sanitizer none -O "$target" -- -max_total_time="$seconds" -max_len=16384 \
      -print_final_stats=1 2> "$here/target/$target.log"; then
    failed+=("$target")
    tail -40 "$here/target/$target.log"
  else
    grep -E '^stat::number_of_executed_units|^Done' "$here/target/$target.log" | tr '\n' ' '; echo
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no panic"
