#!/usr/bin/env bash
# The hostile campaign (issue #17): pentad used as a hostile user would, by
# category: bad decks, bad data, corrupted and deleted checkpoints, kill -9
# of a rank (during training, during a checkpoint write), a frozen rank
# (SIGSTOP), signals, disk full, read-only directories, divergence, and 100
# mutations of input/tiny.toml drawn with a fixed seed. Each case passes when
# it keeps the README's promise: a failure exits non-zero on every rank with
# one pentad message that names the thing (a signal case: its documented
# exit), no hang (a time limit per case), no crash (a signal the case did not
# send, rc 134/139, "Segmentation", "terminate called", sanitizer text), and,
# after every case that touches a checkpoint, the checkpoint before it still
# verifies (`pentad ckpt info`). Prints a markdown table (category | cases |
# passed | crashes | hangs), the time to exit after a rank is killed or
# frozen, and the checkpoints lost; exits 1 if any case failed.
# usage: campaign.sh   (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR;
#        PENTAD_CAMPAIGN_MUTANTS=100, PENTAD_CAMPAIGN_SEED=17, PENTAD_CAMPAIGN_VERBOSE=1)
set -u
# Disk full and read-only cases mount a tmpfs / a read-only bind in a private
# mount namespace (root); without one they are skipped, with a message.
if [ -z "${PENTAD_IN_MOUNT_NS:-}" ] && unshare -m --propagation private true 2>/dev/null; then
  PENTAD_IN_MOUNT_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"   # run, verified, $deck (the tiny parity GPT-2)
PENTAD_PYTHON=${PENTAD_PYTHON:-/usr/bin/python3}  # with h5py: where a tensor lies in a checkpoint
MUTANTS=${PENTAD_CAMPAIGN_MUTANTS:-100}
SEED=${PENTAD_CAMPAIGN_SEED:-17}
VERBOSE=${PENTAD_CAMPAIGN_VERBOSE:-}  # 1: a line for every case that passed, with its message
RANDOM=$SEED
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pentad_campaign_XXXXXX")
job=""
cleanup() {
  if [ -n "$job" ]; then
    for p in "$tmp"/pid.*; do [ -f "$p" ] && kill -CONT "$(cat "$p")" 2>/dev/null; done
    kill -KILL "$job" 2>/dev/null
  fi
  umount "$tmp/full" "$tmp/ro" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" || exit 1
t_campaign=$(date +%s)

# ---- the run of one case ----------------------------------------------------
# Every rank runs under rank.sh, which records its pid and exit code; a rank
# the launcher killed (after another rank's MPI_Abort or death) leaves no code.
# The code is written to a temporary file and renamed: the launcher's SIGKILL
# can land between the shell's open and its write, and an empty rc file once
# hid a survivor's exit 134 (a UCX transport abort read as a crash).
cat > "$tmp/rank.sh" <<'SH'
#!/usr/bin/env bash
"$@" &
pid=$!
echo "$pid" > "$RANK_DIR/pid.$PMI_RANK"
trap ':' INT TERM
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
wait "$pid"
rc=$?
echo "$rc" > "$RANK_DIR/rc.$PMI_RANK.tmp" && mv "$RANK_DIR/rc.$PMI_RANK.tmp" "$RANK_DIR/rc.$PMI_RANK"
exit "$rc"
SH
export RANK_DIR=$tmp

# launch NP ARGS...: start pentad ARGS on NP ranks in the background ($job, $t0).
launch() {
  local np=$1; shift
  rm -f "$tmp"/rc.* "$tmp"/pid.*
  t0=$(date +%s.%N)
  "$MPIEXEC" -n "$np" bash "$tmp/rank.sh" "$PENTAD" "$@" > "$tmp/out" 2>&1 &
  job=$!
}
# finish LIMIT_S: wait for the job; $rc, $secs (since $t0), $hung.
finish() {
  hung=0
  if ! timeout "$1" tail --pid="$job" -s 0.05 -f /dev/null; then
    hung=1
    for p in "$tmp"/pid.*; do [ -f "$p" ] && kill -CONT "$(cat "$p")" 2>/dev/null; done
    kill -KILL "$job" 2>/dev/null
    for p in "$tmp"/pid.*; do [ -f "$p" ] && kill -KILL "$(cat "$p")" 2>/dev/null; done
  fi
  wait "$job"
  rc=$?
  job=""
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  out=$(cat "$tmp/out")
}
# wait_for TEST_EXPR LIMIT_S: poll (0.05 s) until the bash test holds, while the job runs.
wait_for() {
  local i
  for ((i = 0; i < $2 * 20; ++i)); do
    eval "$1" && return 0
    kill -0 "$job" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
rank_pid() { cat "$tmp/pid.$1" 2>/dev/null; }

# ---- classification ---------------------------------------------------------
declare -A n_cases n_pass n_crash n_hang t_cat
categories=()
failures=()
slow=()     # cases that took over 10 s (not hangs: reported)
skipped=()
lost=0
exit_killed=()
transport_aborts=()  # SIGKILL cases whose surviving rank UCX aborted (see judge)
exit_frozen=()
# judge CATEGORY NAME NP EXPECT PATTERN [SIGNAL]
#   EXPECT fail: rc != 0, no rank exited 0, exactly one pentad error message, matching PATTERN
#   EXPECT ok:   rc == 0 on every rank, PATTERN in the output
#   EXPECT any:  ok, or fail with the message matching PATTERN (mutated decks)
#   EXPECT sigint: every rank exited 130 (mpiexec 130, or 0: hydra, docs/running.md), PATTERN once
#   EXPECT killed: rc != 0 (the launcher reports the rank the case killed), PATTERN in the output
#   SIGNAL: the signal the case sent (its rc >= 128 is then no crash)
# Uses $rc, $out, $hung, $secs; $ck_keep ("FILE STEP", or empty): a checkpoint that must still verify.
judge() {
  local cat=$1 name=$2 np=$3 expect=$4 pattern=$5 sig=${6:-} why="" crash="" r got
  [ -n "${n_cases[$cat]:-}" ] || { categories+=("$cat"); n_cases[$cat]=0; n_pass[$cat]=0; n_crash[$cat]=0; n_hang[$cat]=0; }
  n_cases[$cat]=$((n_cases[$cat] + 1))
  t_cat[$cat]=$(awk -v a="${t_cat[$cat]:-0}" -v b="$secs" 'BEGIN { printf "%.1f", a + b }')
  local errors nerr
  # A pentad message: "pentad: error: ...", "pentad: fatal error on rank ...",
  # or a usage error ("pentad: unknown option ..." before the usage text).
  errors=$(grep -E '^pentad: ' <<<"$out")
  nerr=$(grep -cE '^pentad: ' <<<"$out")
  # Crashes: a signal nobody sent, an abort, crash or sanitizer text.
  local sent=$(( ${sig:-0} ))
  # The one outcome of a kill that is MPI's, not pentad's (docs/running.md,
  # "A rank killed"): the surviving rank was copying into the killed one's
  # memory with UCX's cross-memory-attach transport, and UCX, which MPICH
  # 4.0.2 runs without peer-failure handling, aborts it (SIGABRT, a UCX
  # backtrace through uct_cma_ep_tx). It is counted and reported, not
  # passed over: only a rank other than the victim, only exit 134, only with
  # that backtrace, and only when every "Aborted" line is that rank's.
  local transport_abort=""
  if [ "$sent" -eq 9 ] && [ "$hung" -eq 0 ] && grep -q 'uct_cma_ep_tx' <<<"$out" &&
     grep -q 'ucs_fatal_error_message' <<<"$out"; then
    local survivor_pid aborted  # aborted: the pid of every "Aborted" line, one per line
    aborted=$(grep -E 'line [0-9]+: +[0-9]+ Aborted' <<<"$out" | grep -oE ': +[0-9]+ Aborted' | grep -oE '[0-9]+')
    for ((r = 0; r < np; ++r)); do
      [ "$r" -eq "${victim:--1}" ] && continue
      survivor_pid=$(rank_pid "$r")
      got=$(cat "$tmp/rc.$r" 2>/dev/null || echo -)
      if [ -n "$survivor_pid" ] && [ "$aborted" = "$survivor_pid" ] && { [ "$got" = 134 ] || [ "$got" = - ]; }; then
        transport_abort=$r
      fi
    done
  fi
  if [ "$hung" -eq 0 ] && [ -n "$transport_abort" ]; then
    # Everything else a crash would show must still be absent.
    local rest
    rest=$(grep -vE "line [0-9]+: +$(rank_pid "$transport_abort") Aborted" <<<"$out" |
           grep -E "Segmentation|terminate called|AddressSanitizer|LeakSanitizer|UndefinedBehavior|runtime error:|core dumped|double free|stack smashing|signal (6|11)|Aborted|EXIT CODE: 139" | head -1)
    [ -n "$rest" ] && crash="$rest"
    [ "$rc" -eq 134 ] || [ "$rc" -eq 137 ] || crash="${crash:-mpiexec exit $rc}"
    got=$(cat "$tmp/rc.$victim" 2>/dev/null || echo -)
    [ "$got" = 137 ] || [ "$got" = - ] || crash="${crash:-rank $victim exit $got}"
    transport_aborts+=("$cat / $name: rank $transport_abort")
  elif [ "$hung" -eq 0 ]; then
    if [ "$rc" -eq 134 ] || [ "$rc" -eq 139 ] || { [ "$rc" -ge 128 ] && [ "$rc" -ne $((128 + sent)) ]; }; then
      crash="mpiexec exit $rc"
    fi
    for ((r = 0; r < np; ++r)); do
      got=$(cat "$tmp/rc.$r" 2>/dev/null || echo -)
      if [ "$got" != - ] && [ "$got" -ge 128 ] && [ "$got" -ne $((128 + sent)) ]; then crash="rank $r exit $got"; fi
    done
    local text
    text=$(grep -E "Segmentation|terminate called|AddressSanitizer|LeakSanitizer|UndefinedBehavior|runtime error:|core dumped|double free|stack smashing|signal (6|11)|Aborted|EXIT CODE: (134|139)" <<<"$out" | head -1)
    [ -n "$text" ] && crash="$text"
  fi
  if [ "$hung" -eq 1 ]; then why="hung (no exit after its time limit)"
  elif [ -n "$crash" ]; then why="crash: $crash"
  else
    case $expect in
      fail|any)
        if [ "$expect" = any ] && [ "$rc" -eq 0 ] && [ "$nerr" -eq 0 ]; then :
        elif [ "$rc" -eq 0 ]; then why="exit 0"
        elif [ "$nerr" -ne 1 ]; then why="$nerr pentad error messages"
        elif ! grep -qE -- "$pattern" <<<"$errors"; then why="the message does not name /$pattern/"
        fi
        for ((r = 0; r < np; ++r)); do
          [ "$(cat "$tmp/rc.$r" 2>/dev/null)" = 0 ] && [ "$rc" -ne 0 ] && why="${why:+$why; }rank $r exited 0"
        done ;;
      ok)
        [ "$rc" -eq 0 ] || why="exit $rc"
        [ "$nerr" -eq 0 ] || why="${why:+$why; }an error message"
        grep -qE -- "$pattern" <<<"$out" || why="${why:+$why; }no /$pattern/" ;;
      sigint)
        for ((r = 0; r < np; ++r)); do
          got=$(cat "$tmp/rc.$r" 2>/dev/null || echo none)
          [ "$got" = 130 ] || why="${why:+$why; }rank $r exit $got"
        done
        [ "$rc" -eq 130 ] || [ "$rc" -eq 0 ] || why="${why:+$why; }mpiexec exit $rc"
        [ "$(grep -cE -- "$pattern" <<<"$out")" -eq 1 ] || why="${why:+$why; }no single /$pattern/" ;;
      killed)
        [ "$rc" -ne 0 ] || why="exit 0"
        # After a transport abort the launcher may end the victim's wrapper
        # before it reports the kill; the abort then stands for the report.
        [ -n "$transport_abort" ] || grep -qE -- "$pattern" <<<"$out" || why="${why:+$why; }no /$pattern/" ;;
    esac
  fi
  # Nothing valid lost.
  if [ -n "${dir_keep:-}" ]; then  # "DIR MD5FILE": DIR holds exactly the files MD5FILE lists, unchanged
    local d=${dir_keep% *} sums=${dir_keep##* } have want
    have=$(ls -A "$d" | sort | tr '\n' ' ') want=$(awk '{ print $2 }' "$sums" | sort | tr '\n' ' ')
    if [ "$have" != "$want" ] || ! (cd "$d" && md5sum -c --quiet "$sums" > /dev/null 2>&1); then
      why="${why:+$why; }files lost or left: $d holds '$have', had '$want' (md5sum -c: $(cd "$d" && md5sum -c --quiet "$sums" 2>&1 | head -1))"
      lost=$((lost + 1))
    fi
  fi
  if [ -n "${ck_keep:-}" ]; then
    local f=${ck_keep% *} step=${ck_keep##* } info
    info=$(timeout 60 "$PENTAD" ckpt info "$f" 2>&1)
    # step "any": the directory's latest, whichever step the case reached.
    if { [ "$step" != any ] && ! grep -q "^step: $step$" <<<"$info"; } || ! grep -q "checksums OK" <<<"$info"; then
      why="${why:+$why; }checkpoint lost: $f (step $step) no longer verifies: $(tail -1 <<<"$info")"
      lost=$((lost + 1))
    fi
  fi
  awk -v s="$secs" 'BEGIN { exit !(s > 10) }' && slow+=("$cat / $name: ${secs} s")
  if [ -z "$why" ]; then
    n_pass[$cat]=$((n_pass[$cat] + 1))
    [ -n "$VERBOSE" ] && echo "ok: $cat / $name: exit $rc in ${secs}s: $(head -1 <<<"${errors:-$(grep -E -- "$pattern" <<<"$out" | head -1)}" | cut -c1-250)"
  else
    [ "$hung" -eq 1 ] && n_hang[$cat]=$((n_hang[$cat] + 1))
    [ -n "$crash" ] && [ "$hung" -eq 0 ] && n_crash[$cat]=$((n_crash[$cat] + 1))
    failures+=("$cat / $name: $why")
    echo "FAIL: $cat / $name ($np rank(s), exit $rc, ${secs}s): $why"
    tail -8 <<<"$out" | cut -c1-300 | sed 's/^/    /'
  fi
  ck_keep="" dir_keep=""
}

# record CATEGORY NAME WHY CRASH HUNG: a case judged elsewhere (a script of its own).
record() {
  local cat=$1 name=$2 why=$3
  [ -n "${n_cases[$cat]:-}" ] || { categories+=("$cat"); n_cases[$cat]=0; n_pass[$cat]=0; n_crash[$cat]=0; n_hang[$cat]=0; }
  n_cases[$cat]=$((n_cases[$cat] + 1))
  if [ -z "$why" ]; then n_pass[$cat]=$((n_pass[$cat] + 1)); return; fi
  [ "$4" = 1 ] && n_crash[$cat]=$((n_crash[$cat] + 1))
  [ "$5" = 1 ] && n_hang[$cat]=$((n_hang[$cat] + 1))
  failures+=("$cat / $name: $why")
  echo "FAIL: $cat / $name: $why"
}

# one CATEGORY NAME NP EXPECT PATTERN LIMIT_S ARGS...: run a case to its end and judge it.
one() {
  local cat=$1 name=$2 np=$3 expect=$4 pattern=$5 limit=$6; shift 6
  launch "$np" "$@"
  finish "$limit"
  judge "$cat" "$name" "$np" "$expect" "$pattern"
}

# ---- inputs -----------------------------------------------------------------
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null || { echo "prep failed"; exit 1; }
D=$tmp/data
# The tiniest model; dp = 2 (deck cases run on 2 ranks).
cat > "$tmp/base.toml" <<DECK
[model]
n_layers = 1
d_model = 16
n_heads = 2
seq_len = 8
[parallel]
dp = 2
[train]
steps = 2
micro_batch = 1
threads = 1
warmup_steps = 0
[data]
train = "$D/train.bin"
[log]
peak_tflops = 1
[checkpoint]
dir = "$tmp/ck_base"
DECK
base=$tmp/base.toml
# edit NAME SED_EXPR...: a copy of the base deck with the sed expressions applied.
edit() {
  local n=$1; shift
  local args=()
  for e in "$@"; do args+=(-e "$e"); done
  sed "${args[@]}" "$base" > "$tmp/$n.toml"
  echo "$tmp/$n.toml"
}
# mkdata PATH MAGIC VERSION COUNT NTOKENS MAXTOKEN: a token file (256 int32 header, uint16 tokens).
mkdata() {
  /usr/bin/python3 - "$@" <<'PY'
import struct, sys
path, magic, version, count, n, top = sys.argv[1], *map(int, sys.argv[2:])
hdr = [0] * 256
hdr[0], hdr[1], hdr[2] = magic, version, count
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *hdr))
    f.write(struct.pack("<%dH" % n, *[(i * 7) % (top + 1) for i in range(n)]))
PY
}
garbage() { /usr/bin/python3 -c "import random,sys; random.seed($2); sys.stdout.buffer.write(bytes(random.randrange(256) for _ in range($3)))" > "$1"; }

echo "== bad decks"
C="bad decks"
T=30
dcase() {  # dcase NAME PATTERN DECK_OR_EMPTY [--set k=v]...
  local name=$1 pattern=$2 d=${3:-$base}; shift 3
  one "$C" "$name" 2 fail "$pattern" $T train "$d" "$@"
}
# wrong types
dcase type_int_string      'model.n_layers: expected an integer' "$(edit t1 's/^n_layers = 1/n_layers = "one"/')"
dcase type_int_float       'model.d_model' "$(edit t2 's/^d_model = 16/d_model = 16.5/')"
dcase type_float_string    'train.lr' "$(edit t3 '/^\[train\]/a lr = "fast"')"
dcase type_int_bool        'train.steps' "$(edit t4 's/^steps = 2/steps = true/')"
dcase type_int_array       'model.seq_len' "$(edit t5 's/^seq_len = 8/seq_len = [8]/')"
dcase type_string_int      'data.train' "$(edit t6 "s|^train = .*|train = 5|")"
dcase type_bool_string     'checkpoint.save_final' "$(edit t7 '/^\[checkpoint\]/a save_final = "yes"')"
dcase type_table           'model.n_heads' "$(edit t8 's/^n_heads = 2/n_heads = { a = 1 }/')"
dcase type_set_float       'train.micro_batch' "" --set train.micro_batch=1.5
dcase type_set_word        'model.d_model' "" --set model.d_model=wide
dcase type_set_lr          'train.lr' "" --set train.lr=fast
# unknown keys and sections
dcase unknown_key          "unknown key 'model.n_layer'" "$(edit u1 's/^n_layers/n_layer/')"
dcase unknown_section      'modle' "$(edit u2 's/^\[model\]/[modle]/')"
dcase unknown_top_level    'colour' "$(edit u3 '1i colour = "red"')"
dcase unknown_set          "unknown key 'train.stepz'" "" --set train.stepz=3
dcase unknown_set_section  'optim' "" --set optim.lr=3
dcase set_without_equals   'train.steps' "" --set train.steps
dcase set_empty_key        '--set' "" --set =3
# negative and zero sizes
for kv in model.n_layers=0 model.n_layers=-1 model.d_model=0 model.d_model=-16 model.n_heads=0 model.seq_len=0 \
          model.seq_len=-8 model.vocab_size=0 train.micro_batch=0 train.micro_batch=-1 train.grad_accum=0 \
          train.steps=-1 train.lr=-1 train.warmup_steps=-1 train.grad_clip=-1 train.eval_batches=0 \
          checkpoint.every=-1 checkpoint.keep=-1 parallel.dp=0 parallel.tp=0 parallel.comm_timeout_s=-1 \
          log.every=-1 parallel.bucket_mb=0 train.beta1=1.5; do
  dcase "range_${kv//[.=]/_}" "${kv%%=*}" "" --set "$kv"
done
# absurd sizes
# (1e6 blocks: the memory plan lists every block's tensors, ~20 s per rank
# on the development machine before the refusal; hence its own limit.)
T=90 dcase absurd_n_layers 'memory: the layout does not fit.*model.n_layers' "" --set model.n_layers=1000000
dcase absurd_d_model       'memory: the layout does not fit.*model.d_model' "" --set model.d_model=1000000000 --set model.d_ff=256 --set model.n_heads=1
dcase absurd_micro_batch   'memory: the layout does not fit.*train.micro_batch' "" --set train.micro_batch=100000000
dcase absurd_seq_len       'model.seq_len' "" --set model.seq_len=1000000000
dcase absurd_int_overflow  'train.steps' "" --set train.steps=99999999999999999999
dcase absurd_int32         'model.d_model' "" --set model.d_model=2147483648
dcase absurd_vocab         'model.vocab_size' "" --set model.vocab_size=2147483648
dcase absurd_n_heads       'model.n_heads' "" --set model.n_heads=1000000
# impossible layouts
dcase layout_ranks         'parallel.*2 ranks' "" --set parallel.dp=3
dcase layout_tp_heads      'n_heads' "" --set parallel.dp=1 --set parallel.tp=2 --set model.n_heads=3 --set model.d_model=18
dcase layout_pp_layers     'model.n_layers|parallel.pp' "" --set parallel.dp=1 --set parallel.pp=2 --set train.grad_accum=2
dcase layout_pp_accum      'train.grad_accum=1 gives 1 micro-batches' "" --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=2
dcase layout_cp_seq        'model.seq_len=7' "" --set parallel.dp=1 --set parallel.cp=2 --set model.seq_len=7
dcase layout_ep_dense      'parallel.ep=2' "" --set parallel.ep=2
dcase layout_zero_stage    'parallel.zero' "" --set parallel.zero=5
dcase layout_schedule      'parallel.schedule' "" --set parallel.schedule=bogus
dcase layout_sp_no_tp      'parallel.sp' "" --set parallel.sp=true
dcase layout_stage_layers  'parallel.stage_layers' "" --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=2 --set train.grad_accum=2 --set parallel.stage_layers=2,1
dcase enum_family          'model.family' "" --set model.family=gpt3
dcase enum_dtype           'train.dtype' "" --set train.dtype=fp8
dcase enum_recompute       'train.recompute' "" --set train.recompute=some
dcase enum_backend         'backend' "" --set backend=tpu
# files: directories, missing, empty, garbage
dcase deck_directory       "cannot read input deck '.*/data': is a directory" "$D"
dcase deck_missing         "cannot read input deck '.*/nope.toml'" "$tmp/nope.toml"
: > "$tmp/empty.toml"
dcase deck_empty           'data.train|job has 2 ranks' "$tmp/empty.toml"
garbage "$tmp/garbage.toml" 1 4096
dcase deck_binary_garbage  'garbage.toml:[0-9]+' "$tmp/garbage.toml"
printf '[model]\nn_layers = 1\000\n' > "$tmp/nul.toml"
dcase deck_nul_byte        'nul.toml' "$tmp/nul.toml"
dcase deck_dev_null        'data.train|job has 2 ranks' /dev/null
dcase toml_unclosed_table  'syntax error' "$(edit s1 's/^\[model\]/[model/')"
dcase toml_unterminated    'syntax error' "$(edit s2 "s|^train = \"\\(.*\\)\"|train = \"\\1|")"
dcase toml_duplicate_key   'n_layers' "$(edit s3 '/^n_layers/p')"
dcase toml_duplicate_table 'model' "$(edit s4 '$a [model]')"
dcase toml_no_value        's5.toml:[0-9]+' "$(edit s5 's/^d_model = 16/d_model =/')"
dcase data_missing         "data file '.*nope.bin'" "" --set data.train="$tmp/nope.bin"
dcase data_directory       "data file '.*data'|data.train" "" --set data.train="$D"
dcase data_val_missing     "data file '.*nope_val.bin'|data.val" "" --set data.val="$tmp/nope_val.bin"
dcase data_train_empty_key 'data.train' "" --set data.train=
dcase resume_missing_file  'nope.h5' "" --set checkpoint.resume="$tmp/nope.h5"
one "$C" unknown_command 2 fail "unknown command 'trian'" $T trian "$base"
one "$C" unknown_flag 2 fail "--sett" $T train "$base" --sett train.steps=2

echo "== bad data"
C="bad data"
dd_case() {  # dd_case NAME PATTERN FILE [extra --set...]: data.train = FILE
  local name=$1 pattern=$2 f=$3; shift 3
  one "$C" "$name" 2 fail "$pattern" $T train "$base" --set data.train="$f" "$@"
}
mkdata "$tmp/magic.bin" 12345 1 1000 1000 200
dd_case wrong_magic        "data file '.*magic.bin'.*magic" "$tmp/magic.bin"
mkdata "$tmp/version.bin" 20240520 99 1000 1000 200
dd_case wrong_version      "data file '.*version.bin'.*version" "$tmp/version.bin"
mkdata "$tmp/trunc.bin" 20240520 1 5000 100 200
dd_case truncated          "data file '.*trunc.bin'.*truncated" "$tmp/trunc.bin"
mkdata "$tmp/vocab.bin" 20240520 1 1000 1000 300
dd_case token_ge_vocab     "data file '.*vocab.bin'.*vocab_size" "$tmp/vocab.bin"
: > "$tmp/empty.bin"
dd_case empty_file         "data file '.*empty.bin'" "$tmp/empty.bin"
mkdata "$tmp/zero.bin" 20240520 1 0 0 0
dd_case no_tokens          "data file '.*zero.bin'" "$tmp/zero.bin"
mkdata "$tmp/short.bin" 20240520 1 5 5 200
dd_case fewer_than_seq     "data file '.*short.bin'|short.bin" "$tmp/short.bin"
mkdata "$tmp/neg.bin" 20240520 1 -7 10 200
dd_case negative_count     "data file '.*neg.bin'" "$tmp/neg.bin"
head -c 100 "$D/train.bin" > "$tmp/half_header.bin"
dd_case half_header        "data file '.*half_header.bin'" "$tmp/half_header.bin"
garbage "$tmp/garbage.bin" 2 65536
dd_case garbage            "data file '.*garbage.bin'" "$tmp/garbage.bin"
dd_case val_wrong_magic    "data file '.*magic.bin'.*magic" "$D/train.bin" --set data.val="$tmp/magic.bin"
dd_case val_truncated      "data file '.*trunc.bin'.*truncated" "$D/train.bin" --set data.val="$tmp/trunc.bin"
one "$C" prep_missing_input 1 fail "nope.txt" $T prep --out "$tmp/prep_out" "$tmp/nope.txt"
one "$C" prep_directory_input 1 fail "data" $T prep --out "$tmp/prep_out2" "$D"
printf '{"text": "a"}\n{"text": "b"\n' > "$tmp/bad_line.jsonl"
one "$C" prep_bad_json_line 2 fail "bad_line.jsonl' line 2: not valid JSON" $T prep --out "$tmp/prep_out3" "$tmp/bad_line.jsonl"
printf '{"body": "a"}\n' > "$tmp/no_text.jsonl"
one "$C" prep_jsonl_no_text_field 2 fail "no_text.jsonl' line 1: no field \"text\"" $T prep --out "$tmp/prep_out4" "$tmp/no_text.jsonl"
cp "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt "$tmp/not_gzip.txt.gz"
one "$C" prep_not_gzip 2 fail "not_gzip.txt.gz': not gzip data" $T prep --out "$tmp/prep_out5" "$tmp/not_gzip.txt.gz"
gzip -c "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt | head -c 200 > "$tmp/truncated.txt.gz"
one "$C" prep_truncated_gzip 2 fail "truncated.txt.gz': not valid gzip data" $T prep --out "$tmp/prep_out6" "$tmp/truncated.txt.gz"

echo "== checkpoints"
C="checkpoints"
# A good directory: steps 2 and 4 (keep all), latest -> step 4. Each case damages a copy.
one "$C" setup_two_checkpoints 1 ok "^summary" 60 train "$base" --set parallel.dp=1 --set train.steps=4 \
  --set checkpoint.every=2 --set checkpoint.keep=0 --set checkpoint.dir="$tmp/ck_good"
good=$tmp/ck_good
s2=step_000002.h5 s4=step_000004.h5
resume=(train "$base" --set parallel.dp=2 --set train.steps=6 --set checkpoint.resume=latest --set checkpoint.every=2)
# fresh NAME: a copy of the good directory in $ck.
fresh() { ck=$tmp/ck_$1; rm -rf "$ck"; cp -r "$good" "$ck"; }
# flip FILE OFFSET: overwrite 16 bytes at OFFSET with 0xff.
flip() { printf '\377\377\377\377\377\377\377\377\377\377\377\377\377\377\377\377' | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null; }
size_of() { stat -c %s "$1"; }
ck_case() {  # ck_case NAME EXPECT PATTERN ARGS...: $ck prepared; step 2 must still verify
  local name=$1 expect=$2 pattern=$3; shift 3
  launch 2 "$@"
  finish $T
  ck_keep="$ck/$s2 2"
  judge "$C" "$name" 2 "$expect" "$pattern"
}
fresh trunc_half; truncate -s $(( $(size_of "$ck/$s4") / 2 )) "$ck/$s4"
ck_case truncate_newest_half fail "step_000004.h5" "${resume[@]}" --set checkpoint.dir="$ck"
fresh trunc_zero; : > "$ck/$s4"
ck_case truncate_newest_zero fail "step_000004.h5" "${resume[@]}" --set checkpoint.dir="$ck"
# chunk_offset FILE TENSOR: where the tensor's (first) chunk lies in the file (h5py).
chunk_offset() {
  "$PENTAD_PYTHON" -c "import h5py, sys; c = h5py.File(sys.argv[1], 'r')[sys.argv[2]].id.get_chunk_info(0); print(c.byte_offset + c.size // 2)" "$1" "$2"
}
# Bit rot inside a tensor: its checksum must catch it, naming file and tensor.
for t in model/wte model/layers/0/mlp/w_up optim/m/model/wte optim/v/model/layers/0/attn/wq; do
  fresh "flip_${t//\//_}"; flip "$ck/$s4" "$(chunk_offset "$ck/$s4" "$t")"
  ck_case "flip_bytes_in_$t" fail "step_000004.h5.*$t" "${resume[@]}" --set checkpoint.dir="$ck"
done
# Bytes flipped at fixed places of the file: much of a small checkpoint is
# padding the reader never touches, so passing here means no crash, no hang,
# and either a named error or a resume that verified what it read.
for frac in 10 60 99; do
  fresh "flip_$frac"; flip "$ck/$s4" $(( $(size_of "$ck/$s4") * frac / 100 ))
  ck_case "flip_bytes_at_${frac}pct_of_the_file" any "step_000004.h5" "${resume[@]}" --set checkpoint.dir="$ck"
done
fresh flip_superblock; flip "$ck/$s4" 0
ck_case flip_superblock fail "step_000004.h5" "${resume[@]}" --set checkpoint.dir="$ck"
fresh no_latest; rm "$ck/latest"
ck_case delete_latest ok "missing; using the newest checkpoint .* that verifies: .*step_000004.h5" "${resume[@]}" --set checkpoint.dir="$ck"
fresh garbage_latest; printf '\000\023garbage\377' > "$ck/latest"
ck_case garbage_latest ok "using the newest checkpoint .* that verifies: .*step_000004.h5" "${resume[@]}" --set checkpoint.dir="$ck"
fresh dangling_latest; echo step_000099.h5 > "$ck/latest"
ck_case dangling_latest any "step_000099.h5" "${resume[@]}" --set checkpoint.dir="$ck"
fresh escaping_latest; echo ../../../../etc/passwd > "$ck/latest"
ck_case escaping_latest any "latest|passwd" "${resume[@]}" --set checkpoint.dir="$ck"
fresh step_is_dir; rm "$ck/$s4"; mkdir "$ck/$s4"
ck_case newest_is_directory fail "step_000004.h5" "${resume[@]}" --set checkpoint.dir="$ck"
fresh explicit_flipped; flip "$ck/$s4" "$(chunk_offset "$ck/$s4" model/wpe)"
ck_case resume_explicit_flipped fail "step_000004.h5" train "$base" --set train.steps=6 --set checkpoint.resume="$ck/$s4" --set checkpoint.dir="$ck"
fresh stale_tmp; garbage "$ck/step_000006.h5.tmp" 3 10000
ck_case stale_tmp_ignored ok "resumed from .*step_000004.h5" "${resume[@]}" --set checkpoint.dir="$ck"
fresh all_deleted; rm "$ck"/step_*.h5; ck_keep=""
launch 2 "${resume[@]}" --set checkpoint.dir="$ck"; finish $T
judge "$C" all_step_files_deleted 2 fail "step_000004.h5|latest"
fresh info_flipped; flip "$ck/$s4" "$(chunk_offset "$ck/$s4" optim/m/model/wte)"
ck_case info_flipped fail "step_000004.h5" ckpt info "$ck/$s4"
fresh info_truncated; truncate -s 4096 "$ck/$s4"
ck_case info_truncated fail "step_000004.h5" ckpt info "$ck/$s4"
fresh export_flipped; flip "$ck/$s4" "$(chunk_offset "$ck/$s4" model/wte)"
ck_case export_flipped fail "step_000004.h5" ckpt export "$ck/$s4" --to "$tmp/exp_flipped"
ck_case info_not_a_checkpoint fail "train.bin" ckpt info "$D/train.bin"
ck_case info_missing fail "nope.h5" ckpt info "$tmp/nope.h5"

# A training that runs until stopped: 2 ranks, a checkpoint every 2 steps.
long=(train "$base" --set train.steps=1000000 --set checkpoint.every=2 --set checkpoint.keep=2 --set log.metrics="$tmp/m.jsonl")
rows() { [ -f "$tmp/m.jsonl" ] && wc -l < "$tmp/m.jsonl" || echo 0; }
# ms_since T0: seconds since T0, to the millisecond.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }

echo "== kill -9 of a rank"
C="kill -9 of a rank"
for trial in 1 2 3 4; do
  ck=$tmp/ck_kill_$trial; rm -f "$tmp/m.jsonl"
  victim=$((RANDOM % 2))
  launch 2 "${long[@]}" --set checkpoint.dir="$ck"
  if ! wait_for '[ -f "$ck/latest" ] && [ "$(rows)" -ge 6 ]' 60; then
    finish 5; judge "$C" "during_training_$trial" 2 killed "never started"; continue
  fi
  sleep "0.$((RANDOM % 10))"
  kill -9 "$(rank_pid $victim)"; tk=$(date +%s.%N)
  finish 30
  [ "$hung" -eq 0 ] && exit_killed+=("$(since "$tk")")
  ck_keep="$ck any"
  judge "$C" "during_training_rank${victim}_$trial" 2 killed 'Killed|EXIT CODE: (9|137)|KILLED BY SIGNAL: 9' 9
done
# During a checkpoint write: a model large enough (2 x 256-wide blocks) that
# a write lasts long enough to be caught; the kill lands while a .tmp exists.
for trial in 1 2 3 4; do
  ck=$tmp/ck_killw_$trial; rm -f "$tmp/m.jsonl"
  victim=$((RANDOM % 2))
  launch 2 "${long[@]}" --set checkpoint.dir="$ck" --set checkpoint.every=1 --set model.n_layers=2 \
    --set model.d_model=256 --set model.n_heads=4
  if ! wait_for '[ -f "$ck/latest" ]' 60 || ! wait_for 'compgen -G "$ck/*.tmp" > /dev/null' 30; then
    finish 5; judge "$C" "during_write_$trial" 2 killed "no checkpoint write seen"; continue
  fi
  kill -9 "$(rank_pid $victim)"; tk=$(date +%s.%N)
  finish 30
  [ "$hung" -eq 0 ] && exit_killed+=("$(since "$tk")")
  ck_keep="$ck any"
  judge "$C" "during_checkpoint_write_rank${victim}_$trial" 2 killed 'Killed|EXIT CODE: (9|137)|KILLED BY SIGNAL: 9' 9
  latest=$(cat "$ck/latest" 2>/dev/null)
  case $latest in *.tmp*) record "$C" "latest_after_write_kill_$trial" "latest names a temporary: $latest" 0 0 ;; esac
done

echo "== frozen rank (SIGSTOP)"
C="frozen rank (SIGSTOP)"
FROZEN_TIMEOUT_S=2
for trial in 1 2 3; do
  ck=$tmp/ck_stop_$trial; rm -f "$tmp/m.jsonl"
  victim=$((trial % 2))
  launch 2 "${long[@]}" --set checkpoint.dir="$ck" --set parallel.comm_timeout_s=$FROZEN_TIMEOUT_S
  if ! wait_for '[ -f "$ck/latest" ] && [ "$(rows)" -ge 6 ]' 60; then
    finish 5; judge "$C" "stop_$trial" 2 fail "never started"; continue
  fi
  kill -STOP "$(rank_pid $victim)"; tk=$(date +%s.%N)
  finish $((FROZEN_TIMEOUT_S + 20))
  [ "$hung" -eq 0 ] && exit_frozen+=("$(since "$tk")")
  ck_keep="$ck any"
  # The launcher ends the frozen rank with SIGKILL: that signal is the case's.
  judge "$C" "sigstop_rank${victim}_$trial" 2 fail \
    "MPI operation '[A-Za-z_ ]+' in group '[A-Za-z_][^']*' did not return within parallel.comm_timeout_s = $FROZEN_TIMEOUT_S s \(waited [0-9.]+ s, step [0-9]+\)" 9
done

echo "== signals"
C="signals"
ck=$tmp/ck_sigint; rm -f "$tmp/m.jsonl"
launch 2 "${long[@]}" --set checkpoint.dir="$ck"
wait_for '[ "$(rows)" -ge 4 ]' 60
kill -INT "$job"
finish 30; ck_keep="$ck any"
judge "$C" sigint_to_mpiexec 2 sigint '^signal received: stopped after step [0-9]+ with a checkpoint; exiting with code 130 \(SIGINT\)$' 2
for sig in TERM USR1; do
  ck=$tmp/ck_sig$sig; rm -f "$tmp/m.jsonl"
  launch 2 "${long[@]}" --set checkpoint.dir="$ck"
  wait_for '[ "$(rows)" -ge 4 ]' 60
  kill -$sig "$(rank_pid 0)" "$(rank_pid 1)"
  finish 30; ck_keep="$ck any"
  judge "$C" "sig${sig,,}_to_every_rank" 2 ok '^signal received: stopped after step [0-9]+ with a checkpoint; exiting$'
done
ck=$tmp/ck_sigint_rank; rm -f "$tmp/m.jsonl"
launch 2 "${long[@]}" --set checkpoint.dir="$ck"
wait_for '[ "$(rows)" -ge 4 ]' 60
kill -INT "$(rank_pid 0)" "$(rank_pid 1)"
finish 30; ck_keep="$ck any"
judge "$C" sigint_to_every_rank 2 sigint '^signal received: stopped after step [0-9]+ with a checkpoint; exiting with code 130 \(SIGINT\)$' 2
# A prep stopped while it writes its staging file: the token files an earlier
# prep left in the same folder stay as they were, nothing beside them.
"$PENTAD" prep --out "$tmp/prep_sig" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
(cd "$tmp/prep_sig" && md5sum train.bin val.bin) > "$tmp/prep_sig.md5"
yes "the quick brown fox jumps over the lazy dog" | head -c 300000000 > "$tmp/prep_big.txt"
for sig in INT TERM; do
  launch 2 prep --out "$tmp/prep_sig" "$tmp/prep_big.txt"
  wait_for 'compgen -G "$tmp/prep_sig/.prep-*/tokens" > /dev/null' 60
  if [ $sig = INT ]; then kill -INT "$job"; else kill -TERM "$(rank_pid 0)" "$(rank_pid 1)"; fi
  finish 30; dir_keep="$tmp/prep_sig $tmp/prep_sig.md5"
  if [ $sig = INT ]; then
    judge "$C" prep_sigint_to_mpiexec 2 sigint '^signal received: prep stopped before it finished, no token file written or replaced; exiting with code 130 \(SIGINT\)$' 2
  else
    judge "$C" prep_sigterm_to_every_rank 2 fail 'prep: stopped by a signal before it finished; no token file was written or replaced'
  fi
done
rm -f "$tmp/prep_big.txt"

echo "== disk full"
C="disk full"
# tests/reliability/disk_full.sh: its own tmpfs, its own checks (the
# message names the file, exit 3 or 1 on every rank, the checkpoint before
# it verifies); exit 77 where no tmpfs can be mounted.
for kc in ckpt:1 ckpt:2 final:1 final:2 metrics:1 metrics:2 trace:2 dump:1 export:2 prep:2; do
  kind=${kc%:*} np=${kc#*:}
  t1=$(date +%s.%N)
  o=$(PENTAD_IN_MOUNT_NS=${PENTAD_IN_MOUNT_NS:-} timeout 120 bash "$here/disk_full.sh" "$kind" "$np" 2>&1); r=$?
  t_cat[$C]=$(awk -v a="${t_cat[$C]:-0}" -v s="$(since "$t1")" 'BEGIN { printf "%.1f", a + s }')
  if [ "$r" -eq 77 ]; then skipped+=("disk full $kind ($np rank(s)): $(tail -1 <<<"$o")"); continue; fi
  crash=0 hang=0 why=""
  grep -qE "killed by signal|Segmentation|terminate called" <<<"$o" && crash=1
  grep -qE "did not exit \(timeout\)" <<<"$o" || [ "$r" -eq 124 ] && hang=1
  grep -q "previous checkpoint" <<<"$(grep FAIL <<<"$o")" && lost=$((lost + 1))
  [ "$r" -eq 0 ] || why="$(grep FAIL <<<"$o" | head -3 | tr '\n' ' ')"
  [ "$r" -eq 0 ] || [ -n "$why" ] || why="exit $r"
  record "$C" "${kind}_${np}rank" "$why" $crash $hang
  [ "$r" -eq 0 ] || tail -12 <<<"$o" | sed 's/^/  | /'  # what the case saw, for the log
done

echo "== read-only directories"
C="read-only directories"
ro=$tmp/ro
mkdir -p "$ro"; cp -r "$good" "$ro/ck"
ro_ok=""
if [ -n "${PENTAD_IN_MOUNT_NS:-}" ] && mount --bind "$ro" "$ro" 2>/dev/null && mount -o remount,bind,ro "$ro" 2>/dev/null; then
  ro_ok="a read-only bind mount"
elif [ "$(id -u)" -ne 0 ]; then
  chmod -R a-w "$ro" && ro_ok="chmod a-w"
fi
if [ -z "$ro_ok" ]; then
  skipped+=("read-only directories: no read-only bind mount (needs root and a mount namespace) and root ignores chmod")
else
  rcase() {  # rcase NAME PATTERN ARGS...: step 4 in $ro/ck must still verify
    local name=$1 pattern=$2; shift 2
    launch 2 "$@"; finish $T; ck_keep="$ro/ck/$s4 4"
    judge "$C" "$name" 2 fail "$pattern"
  }
  rcase new_checkpoint_dir  "$ro/new_ck" train "$base" --set checkpoint.dir="$ro/new_ck" --set checkpoint.save_final=true
  rcase checkpoint_write    "$ro/ck" train "$base" --set checkpoint.dir="$ro/ck" --set checkpoint.resume=latest --set train.steps=6 --set checkpoint.every=2
  rcase final_weights       "$ro/ck" train "$base" --set checkpoint.dir="$ro/ck" --set checkpoint.resume=latest --set train.steps=5 --set checkpoint.save_final=true
  rcase metrics             "log.metrics: directory '$ro' is not writable" train "$base" --set log.metrics="$ro/m.jsonl"
  rcase trace               "log.trace: directory '$ro' is not writable" train "$base" --set log.trace="$ro/t.json"
  rcase dump                "log.dump: directory '$ro' is not writable" train "$base" --set log.dump="$ro/d.h5"
  rcase export              "$ro/exp" ckpt export "$ro/ck" --to "$ro/exp"
  launch 1 prep --out "$ro/prep" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt; finish $T
  judge "$C" prep_out 1 fail "$ro/prep"
  launch 1 ckpt info "$ro/ck"; finish $T
  judge "$C" info_reads_a_read_only_checkpoint 1 ok "checksums OK"
fi

echo "== divergence"
C="divergence"
div=(train "$base" --set train.steps=20 --set train.warmup_steps=0 --set checkpoint.every=1)
dv() {  # dv NAME NP PATTERN ARGS...
  local name=$1 np=$2 pattern=$3; shift 3
  ck=$tmp/ck_div_$name
  launch "$np" "${div[@]}" --set checkpoint.dir="$ck" "$@"; finish $T
  [ -f "$ck/latest" ] && ck_keep="$ck any"
  judge "$C" "$name" "$np" fail "$pattern"
}
dv lr1e3_1rank 1 'step [0-9]+: loss or gradient norm is not finite.*on ranks? 0' --set parallel.dp=1 --set train.lr=1e3 --set train.min_lr=1e3
dv lr1e3_dp2 2 'step [0-9]+: loss or gradient norm is not finite.*first non-finite: .*on ranks? ' --set train.lr=1e3 --set train.min_lr=1e3
dv lr1e3_dp2_zero2 2 'step [0-9]+: loss or gradient norm is not finite.*first non-finite: ' --set train.lr=1e3 --set train.min_lr=1e3 --set parallel.zero=2
dv lr1e12_pp2 2 'step [0-9]+: loss or gradient norm is not finite.*first non-finite: .*rank 1 \(pp 1' --set parallel.dp=1 --set parallel.pp=2 \
  --set model.n_layers=2 --set train.grad_accum=2 --set model.family=llama --set train.lr=1e12 --set train.min_lr=1e12
dv lr1e30_no_clip 2 'step [0-9]+: loss or gradient norm is not finite' --set train.lr=1e30 --set train.min_lr=1e30 --set train.grad_clip=0

echo "== mutated decks ($MUTANTS of input/tiny.toml, seed $SEED)"
C="mutated decks"
mkdir -p "$tmp/mut"
# The data of this campaign, and a fixed peak (no sgemm measured at start; a
# mutant may still change it).
sed -e "s|^train = .*|train = \"$D/train.bin\"|" -e "s|^val = .*|val = \"$D/val.bin\"|" \
  -e 's|^\[log\]|[log]\npeak_tflops = 1.0|' "$PENTAD_SOURCE_DIR/input/tiny.toml" > "$tmp/mut/base.toml"
/usr/bin/python3 - "$tmp/mut" "$MUTANTS" "$SEED" <<'PY'
# Mutations of a deck: a value replaced by a hostile one, a line deleted,
# duplicated or garbled, a key misspelt, a section renamed, the file cut short
# or a byte overwritten. One seed, so the same mutants every run.
import random, sys
out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
lines = open(out + "/base.toml").read().splitlines()
keyed = [i for i, l in enumerate(lines) if "=" in l and not l.startswith("#")]
values = ["-1", "0", "1e30", '"x"', "true", "[1, 2]", "99999999999999999999", "3.5", '""', "nan", "inf",
          "-0.0", "2147483648", "{}", "1e-30", "'single'", '"../../etc/passwd"', "0x10", "1_0", "-inf"]
for k in range(n):
    L = list(lines)
    how = rng.choice(["value", "value", "value", "delete", "duplicate", "garble", "misspell", "section", "cut", "byte"])
    i = rng.choice(keyed)
    if how == "value":
        L[i] = L[i].split("=")[0] + "= " + rng.choice(values)
    elif how == "delete":
        del L[i]
    elif how == "duplicate":
        L.insert(i, L[i])
    elif how == "garble":
        L.insert(rng.randrange(len(L)), "".join(chr(rng.randrange(33, 127)) for _ in range(rng.randrange(1, 20))))
    elif how == "misspell":
        key = L[i].split("=")[0].strip()
        j = rng.randrange(len(key))
        L[i] = key[:j] + key[j + 1:] + " = " + L[i].split("=", 1)[1].strip()
    elif how == "section":
        s = rng.choice([j for j, l in enumerate(L) if l.startswith("[")])
        L[s] = rng.choice(["[modle]", "[train", "[[train]]", "[]", "[model.extra]"])
    text = "\n".join(L) + "\n"
    if how == "cut":
        text = text[: rng.randrange(len(text))]
    elif how == "byte":
        b = bytearray(text.encode())
        b[rng.randrange(len(b))] = rng.randrange(256)
        text = bytes(b).decode("latin-1")
    with open("%s/mut_%03d.toml" % (out, k), "w", encoding="latin-1") as f:
        f.write(text)
PY
for f in "$tmp"/mut/mut_*.toml; do
  n=$(basename "$f" .toml)
  # train.steps is pinned (a mutant that deletes it would train for the default).
  one "$C" "$n" 1 any "$n\.toml|[a-z_]+\.[a-z_]+|data file|memory|deck" 60 train "$f" --set train.steps=2 \
    --set checkpoint.dir="$tmp/ck_mut"
done

# ---- the table ----------------------------------------------------------------
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
maximum() { sort -n | tail -1; }
tot=0 totp=0 totc=0 toth=0 times=""
echo
echo "| category | cases | passed | crashes | hangs |"
echo "|---|---:|---:|---:|---:|"
for c in "${categories[@]}"; do
  echo "| $c | ${n_cases[$c]} | ${n_pass[$c]} | ${n_crash[$c]} | ${n_hang[$c]} |"
  times+="$c ${t_cat[$c]:-?} s; "
  tot=$((tot + n_cases[$c])) totp=$((totp + n_pass[$c])) totc=$((totc + n_crash[$c])) toth=$((toth + n_hang[$c]))
done
echo "| **all** | **$tot** | **$totp** | **$totc** | **$toth** |"
echo
ek=$(printf '%s\n' "${exit_killed[@]}" | grep . ); ef=$(printf '%s\n' "${exit_frozen[@]}" | grep . )
echo "time to exit after a rank is killed (kill -9): median $(median <<<"$ek") s, max $(maximum <<<"$ek") s ($(grep -c . <<<"$ek") kills)"
echo "time to exit after a rank freezes (SIGSTOP, parallel.comm_timeout_s = $FROZEN_TIMEOUT_S): median $(median <<<"$ef") s, max $(maximum <<<"$ef") s ($(grep -c . <<<"$ef") freezes)"
echo "checkpoints lost: $lost"
echo "surviving ranks aborted by UCX's cross-memory-attach transport after their peer's SIGKILL (MPI's outcome, not pentad's; docs/running.md): ${#transport_aborts[@]} of $(( ${#exit_killed[@]} + ${#exit_frozen[@]} )) kills and freezes"
[ "${#transport_aborts[@]}" -eq 0 ] || printf '  %s\n' "${transport_aborts[@]}"
echo "time in the cases by category: ${times% }"
echo "campaign: $tot cases in $(( $(date +%s) - t_campaign )) s on $(lscpu | sed -n 's/^Model name: *//p' | head -1), 1-2 ranks, $(date -u +%Y-%m-%d)"
[ "${#skipped[@]}" -eq 0 ] || printf 'skipped: %s\n' "${skipped[@]}"
if [ "${#failures[@]}" -gt 0 ]; then
  echo "FAILED (${#failures[@]}):"; printf '  %s\n' "${failures[@]}"
  exit 1
fi
exit 0
