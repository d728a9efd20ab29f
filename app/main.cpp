// pentad: one SPMD program. main() owns MPI_Init/Finalize and the two error
// paths: an InputError (every rank agrees) is printed once by rank 0 and every
// rank exits 1; a local failure aborts the job from where it happened. It
// dispatches to the subcommands of app/cmd_*.cpp (CLI11, commands.hpp).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/host.hpp"
#include "commands.hpp"
#include "core/error.hpp"

namespace {

const char* kUsage =
    "usage:\n"
    "  pentad train DECK.toml [--set section.key=value]...   train a model\n"
    "  pentad prep --out DIR [--val-fraction F] [--shard-tokens N] [--tokenizer FILE [--pattern NAME]]\n"
    "              [--json-key NAME] FILE...                 text, JSON Lines (.gz, .zst) -> token files (bytes, or BPE)\n"
    "  pentad prep --out DIR --prompt-key P --completion-key C [--tokenizer FILE] FILE.jsonl...\n"
    "                                                         prompt/completion pairs -> token files with a loss mask\n"
    "  pentad prep --out DIR --messages-key M --tokenizer FILE FILE.jsonl...\n"
    "                                                         conversations in the chat format, assistant turns trained\n"
    "  pentad prep --choices --out DIR [--tokenizer FILE] HELLASWAG.jsonl\n"
    "                                                         -> DIR/HELLASWAG.bin, a multiple-choice eval file\n"
    "  pentad ckpt info SPEC                                  summarise and verify a checkpoint\n"
    "  pentad ckpt export SPEC --to DIR                       global weights (+ llm.c GPT-2 .bin)\n"
    "  pentad ckpt export SPEC --to DIR --format hf [--dtype fp32|bf16] [--class Phi3ForCausalLM]\n"
    "                                                         Hugging Face safetensors + config.json\n"
    "  pentad schedule --pp P --m M [--schedule afab|1f1b|interleaved|zbh1|zbv] [--v V] [--groups]\n"
    "                                                         print and check a pipeline schedule\n"
    "  pentad plan DECK --ranks N [--gpu-mem 80GiB] [--gpus-per-node G] [--machine FILE.toml]\n"
    "              [--layout dp=2,tp=2,pp=2,...|deck] [--explain|--json] [--top K] [--moe-load F] [--set k=v]...\n"
    "                                                         rank the layouts that fit by predicted step time\n"
    "  pentad report RUN_DIR_OR_CSV... [--machine FILE.toml] [--one-node] [--csv OUT.csv] [--plot OUT.png]\n"
    "                                                         scaling efficiency, prediction beside measurement\n"
    "  pentad sample SPEC|EXPORT_DIR [--prompt TEXT|--prompt-file F] [--tokens N] [--temperature T]\n"
    "              [--top-k K] [--top-p P] [--repetition-penalty R] [--seed S] [--tokenizer FILE [--pattern NAME]]\n"
    "              [--stop TEXT]... [--ids] [--threads N]\n"
    "              [--special | --chat [--system TEXT] [--no-think] | --messages FILE.json [--no-think]]\n"
    "              [--date DATE|today]  (with --chat or --messages, Llama 3.1+'s chat format)\n"
    "                                                         generate text from a trained model (one rank)\n"
    "    SPEC: a checkpoint file, a checkpoint directory (its latest), or latest (ckpt/latest)\n"
    "    F: dropless MoE, rows one ep rank receives per call over the balanced share (default 1;\n"
    "       a run's metrics log it as moe_recv_load_max)\n"
    "  pentad --help | --version\n";

// A serial tool: rank 0 works, the others wait for its exit code, and an
// error on rank 0 is thrown on every rank (as the same kind of error).
// Collective over MPI_COMM_WORLD.
int run_on_root(const pentad::Command& cmd, int rank) {
  std::string err;
  int code = 0;
  if (rank == 0) {
    try {
      code = cmd.run();
    } catch (const pentad::CliUsageError& e) {
      err = e.what();
      code = -2;
    } catch (const std::exception& e) {  // InputError, or a model/schedule check
      err = e.what();
      code = -1;
    }
  }
  pentad::host::bcast(MPI_COMM_WORLD, &code, 1, 0);
  if (code < 0) err = pentad::host::bcast_string(MPI_COMM_WORLD, err, 0);
  if (code == -2) throw pentad::CliUsageError(err);
  if (code == -1) throw pentad::InputError(err);
  return code;
}

// args[0] names the command; CLI11 parses the rest. Every rank parses the
// same argv, so a command-line error is thrown on every rank.
int dispatch(const std::vector<std::string>& args, pentad::Job job) {
  CLI::App pentad{"pentad: trains transformer language models with dp/tp/sp/cp/pp/ep", "pentad"};
  pentad.set_help_flag();
  pentad.require_subcommand(1);
  const std::vector<pentad::Command> commands = {
      pentad::add_train(pentad, job),    pentad::add_prep(pentad, job), pentad::add_ckpt(pentad),
      pentad::add_schedule(pentad, job), pentad::add_plan(pentad),      pentad::add_report(pentad),
      pentad::add_sample(pentad, job)};
  const auto cmd = std::find_if(commands.begin(), commands.end(),
                                [&](const pentad::Command& c) { return c.cli->get_name() == args[0]; });
  if (cmd == commands.end()) throw pentad::CliUsageError("unknown command '" + args[0] + "'");
  try {
    pentad.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes argv reversed
  } catch (const CLI::ArgumentMismatch&) {
    // An option that takes a value always takes the next argument, so only
    // the last one can lack its value.
    throw pentad::CliUsageError(cmd->missing_value(args.back()));
  } catch (const CLI::ParseError& e) {
    throw pentad::CliUsageError(args[0] + ": " + e.what());
  }
  return cmd->root_only ? run_on_root(*cmd, job.rank) : cmd->run();
}

// MPI_Finalize with a bound. Debian 12's MPICH 4.0.2 over UCX 1.13 on TCP
// can hang in MPI_Finalize (UCX stops progressing the TCP interface while an
// endpoint's flush is pending, openucx/ucx#8738; MPICH then waits in a PMI
// barrier that does not progress UCX). By then every file is closed and every
// line written, so after PENTAD_FINALIZE_TIMEOUT_S seconds (default 10; 0 =
// wait forever) a rank still inside MPI_Finalize says so and exits with the
// run's status instead of holding its node. Every rank has its own timer, so
// ranks waiting for the stuck one in the barrier leave too.
void finalize_bounded(int rc) {
  double limit = 10;
  if (const char* env = std::getenv("PENTAD_FINALIZE_TIMEOUT_S")) limit = std::atof(env);
  if (limit > 0) {
    char what[256];
    std::snprintf(what, sizeof what,
                  "rank %d: MPI_Finalize did not return within %g s (a known MPICH/UCX-over-TCP hang, see "
                  "docs/running.md); exiting with status %d, all output was written before it",
                  pentad::host::rank(MPI_COMM_WORLD), limit, rc);
    pentad::exit_if_still_running_after(limit, rc, what);
  }
  MPI_Finalize();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  pentad::set_job_comm(MPI_COMM_WORLD);
  const pentad::Job job{pentad::host::rank(MPI_COMM_WORLD), pentad::host::size(MPI_COMM_WORLD)};
  const std::vector<std::string> args(argv + 1, argv + argc);
  int rc = 0;
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      if (job.rank == 0) std::fputs(kUsage, args.empty() ? stderr : stdout);
      rc = args.empty() ? 2 : 0;
    } else if (args[0] == "--version") {
      if (job.rank == 0) std::printf("pentad 0.1.0\n");
    } else {
      rc = dispatch(args, job);
    }
  } catch (const pentad::CliUsageError& e) {
    // Every rank parses the same argv, so every rank is here.
    if (job.rank == 0) std::fprintf(stderr, "pentad: %s\n%s", e.what(), kUsage);
    rc = 2;
  } catch (const pentad::InputError& e) {
    if (job.rank == 0) std::fprintf(stderr, "pentad: error: %s\n", e.what());
    rc = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  finalize_bounded(rc);
  return rc;
}
