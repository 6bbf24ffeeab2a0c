// xhc: the single binary of the xHC pipeline runtime.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/process_env.h"
#include "runtime/control/cli/commands.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* help;
};

const Subcommand kSubcommands[] = {
    {"launch", xhc::cli::RunLaunchCommand, "run a whole pipeline job on this machine"},
    {"controller", xhc::cli::RunControllerCommand, "serve a job's controller (multi-host)"},
    {"worker", xhc::cli::RunWorkerCommand, "join a job's controller as a worker"},
    {"status", xhc::cli::RunStatusCommand, "show a running job's state"},
    {"train", xhc::cli::RunTrain, "single-process training on a config"},
    {"eval", xhc::cli::RunEval, "loss (and gradients) of a checkpoint or safetensors weights"},
    {"sample", xhc::cli::RunSample, "generate text from a checkpoint"},
    {"schedule", xhc::cli::RunSchedule, "build, validate, simulate and export pipeline schedules"},
    {"ckpt", xhc::cli::RunCkpt, "verify or inspect a checkpoint"},
    {"study", xhc::cli::RunStudyCommand, "compare schedules and residual types: report + charts"},
    {"ablate", xhc::cli::RunAblateCommand, "residual-variant quality study over seeds: report"},
};

void Usage() {
  std::fprintf(stderr, "usage: xhc <command> [flags]   (xhc <command> --help for its flags)\n\n");
  for (const Subcommand& s : kSubcommands) std::fprintf(stderr, "  %-10s %s\n", s.name, s.help);
}

}  // namespace

int main(int argc, char** argv) {
  xhc::MaybeReexecWithTunedEnv(argv);
  xhc::KeepFreedMemoryInProcess();
  // Under `bazel run`, relative paths mean the caller's directory, not the runfiles tree.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr) {
    if (chdir(dir) != 0) std::perror("chdir to BUILD_WORKING_DIRECTORY");
  }
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    Usage();
    return argc < 2 ? 2 : 0;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const Subcommand& s : kSubcommands) {
    if (std::strcmp(argv[1], s.name) == 0) return s.run(args);
  }
  std::fprintf(stderr, "xhc: unknown command '%s'\n\n", argv[1]);
  Usage();
  return 2;
}
