// Stand-alone `xhc schedule` for development; the main `xhc` binary calls the same
// RunScheduleCommand.
#include <iostream>
#include <string>
#include <vector>

#include "scheduler/schedule_cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return xhc::scheduler::RunScheduleCommand(args, std::cout, std::cerr);
}
