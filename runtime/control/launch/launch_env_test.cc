#include "runtime/control/launch/launch_env.h"

#include "gtest/gtest.h"

namespace xhc::launch {
namespace {

// What `srun` exports to task 1 of a 2-task step on nodes node[07-08].
const EnvMap kSlurm = {{"SLURM_PROCID", "1"},
                       {"SLURM_NTASKS", "2"},
                       {"SLURM_NPROCS", "2"},
                       {"SLURM_JOB_NODELIST", "node[07-08]"}};
// What torchrun (or a Kubernetes PyTorchJob) exports to rank 3 of 4.
const EnvMap kTorchrun = {{"MASTER_ADDR", "trainer-master-0"},
                          {"MASTER_PORT", "29500"},
                          {"RANK", "3"},
                          {"WORLD_SIZE", "4"}};

EnvMap Merge(EnvMap a, const EnvMap& b) {
  for (const auto& [k, v] : b) a[k] = v;
  return a;
}

// The error message of a resolution that must fail with kInvalidArgument.
std::string ErrorOf(const LaunchFlags& flags, const EnvMap& env) {
  absl::StatusOr<WorkerLaunch> r = ResolveWorkerLaunch(flags, env);
  EXPECT_FALSE(r.ok()) << "resolved to " << (r.ok() ? r->controller : "");
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  return std::string(r.status().message());
}

TEST(LaunchEnv, SlurmAloneGivesFirstNodeDefaultPortRankAndWorld) {
  absl::StatusOr<WorkerLaunch> r = ResolveWorkerLaunch({}, kSlurm);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->controller, "node07:7070");
  EXPECT_EQ(r->rank_hint, 1);
  EXPECT_EQ(r->world_size, 2);
  EXPECT_EQ(r->rank_from, "SLURM_PROCID");
  EXPECT_EQ(r->world_from, "SLURM_NTASKS");
}

TEST(LaunchEnv, SlurmPortFromFlagThenEnvAndOlderVariableNames) {
  EnvMap env = {{"SLURM_PROCID", "0"},
                {"SLURM_NPROCS", "3"},
                {"SLURM_NODELIST", "a1,b2"},
                {"XHC_CONTROLLER_PORT", "8000"}};
  absl::StatusOr<WorkerLaunch> r = ResolveWorkerLaunch({}, env);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->controller, "a1:8000");
  EXPECT_EQ(r->world_size, 3);
  EXPECT_EQ(r->world_from, "SLURM_NPROCS");
  LaunchFlags flags;
  flags.controller_port = "9000";
  r = ResolveWorkerLaunch(flags, env);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->controller, "a1:9000");
}

TEST(LaunchEnv, XhcControllerBeatsTheSlurmNodeList) {
  absl::StatusOr<WorkerLaunch> r =
      ResolveWorkerLaunch({}, Merge(kSlurm, {{"XHC_CONTROLLER", "10.0.0.5:7171"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->controller, "10.0.0.5:7171");
  EXPECT_EQ(r->controller_from, "XHC_CONTROLLER");
}

TEST(LaunchEnv, TorchrunAlone) {
  absl::StatusOr<WorkerLaunch> r = ResolveWorkerLaunch({}, kTorchrun);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->controller, "trainer-master-0:29500");
  EXPECT_EQ(r->rank_hint, 3);
  EXPECT_EQ(r->world_size, 4);
}

TEST(LaunchEnv, TorchrunBeatsSlurmAndFlagsBeatBoth) {
  // `srun torchrun ...`: both sets exist; torchrun's describe this process.
  const EnvMap both = Merge(kSlurm, kTorchrun);
  absl::StatusOr<WorkerLaunch> r = ResolveWorkerLaunch({}, both);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->controller, "trainer-master-0:29500");
  EXPECT_EQ(r->rank_hint, 3);
  EXPECT_EQ(r->world_size, 4);
  EXPECT_EQ(r->rank_from, "RANK");
  EXPECT_EQ(r->world_from, "WORLD_SIZE");
  LaunchFlags flags{"ctl.example:7000", "", 0, 1};
  r = ResolveWorkerLaunch(flags, both);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->controller, "ctl.example:7000");
  EXPECT_EQ(r->controller_from, "--controller");
  EXPECT_EQ(r->rank_hint, 0);
  EXPECT_EQ(r->world_size, 1);
  EXPECT_EQ(r->world_from, "--world-size");
}

TEST(LaunchEnv, FlagsAloneAndNothingKnownAboutRankOrWorld) {
  LaunchFlags flags;
  flags.controller = "127.0.0.1:7070";
  absl::StatusOr<WorkerLaunch> r = ResolveWorkerLaunch(flags, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank_hint, -1);
  EXPECT_EQ(r->world_size, 0);
}

TEST(LaunchEnv, EmptyVariableDoesNotShadowALowerSource) {
  absl::StatusOr<WorkerLaunch> r =
      ResolveWorkerLaunch({}, Merge(kSlurm, {{"RANK", ""}, {"XHC_CONTROLLER", ""}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank_hint, 1);
  EXPECT_EQ(r->controller, "node07:7070");
}

TEST(LaunchEnv, Ipv6MasterAddrIsBracketed) {
  absl::StatusOr<WorkerLaunch> r =
      ResolveWorkerLaunch({}, {{"MASTER_ADDR", "fd00::2"}, {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->controller, "[fd00::2]:29500");
}

TEST(LaunchEnv, MalformedValuesNameTheirVariable) {
  EXPECT_EQ(ErrorOf({}, Merge(kTorchrun, {{"RANK", "two"}})),
            "RANK='two' is not a non-negative integer");
  EXPECT_EQ(ErrorOf({}, Merge(kTorchrun, {{"RANK", "-1"}})),
            "RANK='-1' is not a non-negative integer");
  EXPECT_EQ(ErrorOf({}, Merge(kTorchrun, {{"WORLD_SIZE", "0"}})),
            "WORLD_SIZE='0' is not a positive integer");
  EXPECT_EQ(ErrorOf({}, Merge(kTorchrun, {{"MASTER_PORT", "70000"}})),
            "MASTER_PORT='70000' is not a TCP port (1-65535)");
  EXPECT_EQ(ErrorOf({}, Merge(kSlurm, {{"SLURM_NTASKS", "2x"}})),
            "SLURM_NTASKS='2x' is not a positive integer");
  EXPECT_EQ(ErrorOf({}, Merge(kSlurm, {{"SLURM_PROCID", "1.0"}})),
            "SLURM_PROCID='1.0' is not a non-negative integer");
  EXPECT_EQ(ErrorOf({}, Merge(kSlurm, {{"XHC_CONTROLLER_PORT", "http"}})),
            "XHC_CONTROLLER_PORT='http' is not a TCP port (1-65535)");
  EXPECT_NE(ErrorOf({}, Merge(kSlurm, {{"SLURM_JOB_NODELIST", "node[07-08"}}))
                .find("SLURM_JOB_NODELIST: 'node[07-08': unclosed '['"),
            std::string::npos);
  EXPECT_NE(ErrorOf({}, {{"XHC_CONTROLLER", "ctl-host"}})
                .find("XHC_CONTROLLER='ctl-host' is not HOST:PORT"),
            std::string::npos);
  LaunchFlags flags;
  flags.controller = "::1:7070";
  EXPECT_NE(ErrorOf(flags, {}).find("--controller='::1:7070' is not HOST:PORT"), std::string::npos);
}

TEST(LaunchEnv, HalfATorchrunAddressIsAnError) {
  EXPECT_EQ(ErrorOf({}, {{"MASTER_ADDR", "h"}}),
            "MASTER_ADDR is set but MASTER_PORT is not: torchrun-style launches need both");
  EXPECT_EQ(ErrorOf({}, {{"MASTER_PORT", "29500"}}),
            "MASTER_PORT is set but MASTER_ADDR is not: torchrun-style launches need both");
}

TEST(LaunchEnv, RankMustBeBelowWorld) {
  EXPECT_EQ(ErrorOf({}, Merge(kTorchrun, {{"RANK", "4"}})), "RANK=4 is not below WORLD_SIZE=4");
  EXPECT_EQ(ErrorOf({}, Merge(kSlurm, {{"SLURM_PROCID", "2"}})),
            "SLURM_PROCID=2 is not below SLURM_NTASKS=2");
}

TEST(LaunchEnv, NoSourceAtAllListsTheChoices) {
  EXPECT_NE(ErrorOf({}, {{"RANK", "0"}}).find("no controller address: pass --controller"),
            std::string::npos);
}

TEST(LaunchEnv, LowerSourcesAreNotRead) {
  // A broken Slurm variable under a complete torchrun set is never consulted.
  absl::StatusOr<WorkerLaunch> r = ResolveWorkerLaunch(
      {}, Merge(kTorchrun,
                {{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "y"}, {"SLURM_JOB_NODELIST", "[["}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank_hint, 3);
}

TEST(FirstSlurmHost, ExpandsTheFirstElementLikeScontrol) {
  EXPECT_EQ(*FirstSlurmHost("vm"), "vm");
  EXPECT_EQ(*FirstSlurmHost("node[07-09,12],gpu3"), "node07");
  EXPECT_EQ(*FirstSlurmHost("gpu3,node[1-2]"), "gpu3");
  EXPECT_EQ(*FirstSlurmHost("n[5,1-3]"), "n5");
  EXPECT_EQ(*FirstSlurmHost("rack[2-3]-n[001-004]"), "rack2-n001");
  EXPECT_EQ(*FirstSlurmHost("node-a.cluster"), "node-a.cluster");
  EXPECT_FALSE(FirstSlurmHost("").ok());
  EXPECT_FALSE(FirstSlurmHost(",a").ok());
  EXPECT_FALSE(FirstSlurmHost("n[a-b]").ok());
  EXPECT_FALSE(FirstSlurmHost("n]").ok());
  EXPECT_FALSE(FirstSlurmHost("n[]").ok());
}

TEST(ProcessEnv, ReadsThisProcessEnvironment) {
  setenv("XHC_LAUNCH_ENV_TEST", "a=b", 1);
  EXPECT_EQ(ProcessEnv()["XHC_LAUNCH_ENV_TEST"], "a=b");
}

}  // namespace
}  // namespace xhc::launch
