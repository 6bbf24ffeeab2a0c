#include "scheduler/schedule.h"

#include <iostream>
#include "gtest/gtest.h"
#include "scheduler/grid.h"
#include "scheduler/simulator.h"
#include "scheduler/validator.h"

namespace xhc::scheduler {
namespace {

TEST(Smoke, Print) {
  for (auto [t, r, m] : std::vector<std::tuple<std::string,int,int>>{{"dualpipe",4,8},{"dualpipev",4,10},{"1f1b",4,6},{"zb1p",4,6},{"interleaved1f1b",2,4}}) {
    ScheduleRequest req{t, r, m, t == "interleaved1f1b" ? 2 : 1};
    auto s = BuildSchedule(req);
    ASSERT_TRUE(s.ok()) << s.status();
    std::cout << t << "\n" << RenderGrid(s->rank_actions);
    auto v = Validate(*s);
    EXPECT_TRUE(v.ok()) << v.status();
    auto sim = Simulate(*s, SimCosts{});
    ASSERT_TRUE(sim.ok()) << sim.status();
    std::cout << "makespan " << sim->makespan << " bubbles";
    for (double b : sim->bubble) std::cout << " " << b;
    std::cout << " peaks";
    for (int p : sim->peak_activations) std::cout << " " << p;
    std::cout << "\n";
  }
}

}  // namespace
}  // namespace xhc::scheduler
