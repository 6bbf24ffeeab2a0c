// xhc schedule ...: the scheduler package's command line.
#include <iostream>

#include "runtime/cli/commands.h"
#include "scheduler/schedule_cli.h"

namespace xhc::cli {

int RunSchedule(const std::vector<std::string>& args) {
  return scheduler::RunScheduleCommand(args, std::cout, std::cerr);
}

}  // namespace xhc::cli
