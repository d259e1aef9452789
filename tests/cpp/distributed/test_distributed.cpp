// Distributed pieces: launcher environment parsing (torchrun and SLURM), and the
// c10d context's collectives with two Gloo ranks as two threads of this process,
// checked against values computed here independently (float64 references for
// the averaged gradients, a plain loop for the replica checksum).
#include "config/schema.h"
#include "distributed/launch_env.h"
#include "distributed/master_check.h"
#include "helpers.h"
#include "distributed/process_group.h"
#include "ranks.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <thread>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

std::string config_error(const EnvLookup& env) {
  try {
    read_launch_env(env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::map<std::string, std::string> kTorchrun = {{"RANK", "3"},
                                                      {"LOCAL_RANK", "1"},
                                                      {"WORLD_SIZE", "8"},
                                                      {"MASTER_ADDR", "node7"},
                                                      {"MASTER_PORT", "29400"},
                                                      {"TORCHELASTIC_USE_AGENT_STORE", "True"}};

}  // namespace

TEST(LaunchEnv, PlainRunIsSingleProcess) { EXPECT_FALSE(read_launch_env(env_of({})).has_value()); }

TEST(LaunchEnv, Torchrun) {
  auto e = read_launch_env(env_of(kTorchrun));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->launcher, "torchrun");
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->master_addr, "node7");
  EXPECT_EQ(e->master_port, 29400);
  EXPECT_TRUE(e->agent_store);
  // PyTorch compares with str(True) exactly; anything else means rank 0 serves the store.
  for (const char* v : {"False", "1", "true"}) {
    auto vars = kTorchrun;
    vars["TORCHELASTIC_USE_AGENT_STORE"] = v;
    EXPECT_FALSE(read_launch_env(env_of(vars))->agent_store) << v;
  }
  auto one = kTorchrun;
  one["RANK"] = "0";
  one["WORLD_SIZE"] = "1";
  EXPECT_EQ(read_launch_env(env_of(one))->world_size, 1);  // torchrun with one process is still distributed
}

TEST(LaunchEnv, TorchrunErrorsNameTheVariable) {
  auto without = [](const std::string& name) {
    auto vars = kTorchrun;
    vars.erase(name);
    return env_of(vars);
  };
  EXPECT_THAT(config_error(without("MASTER_PORT")), HasSubstr("MASTER_PORT: not set"));
  EXPECT_THAT(config_error(without("LOCAL_RANK")), HasSubstr("LOCAL_RANK: not set"));
  EXPECT_THAT(config_error(without("RANK")), HasSubstr("RANK: not set, but WORLD_SIZE is"));
  auto with = [](const std::string& name, const std::string& value) {
    auto vars = kTorchrun;
    vars[name] = value;
    return env_of(vars);
  };
  EXPECT_THAT(config_error(with("RANK", "8")), HasSubstr("RANK: 8 is not below WORLD_SIZE = 8"));
  EXPECT_THAT(config_error(with("WORLD_SIZE", "eight")), HasSubstr("WORLD_SIZE: expected an integer, got \"eight\""));
  EXPECT_THAT(config_error(with("MASTER_PORT", "70000")), HasSubstr("MASTER_PORT: must be in [1, 65535]"));
  EXPECT_THAT(config_error(with("LOCAL_RANK", "-1")), HasSubstr("LOCAL_RANK: must be in"));
}

TEST(LaunchEnv, SlurmFallback) {
  std::map<std::string, std::string> srun = {{"SLURM_PROCID", "5"},
                                             {"SLURM_LOCALID", "1"},
                                             {"SLURM_STEP_NUM_TASKS", "8"},
                                             {"SLURM_NTASKS", "16"},
                                             {"SLURM_STEP_ID", "0"},
                                             {"SLURM_STEP_NODELIST", "gpu[007-010],cpu1"},
                                             {"SLURM_JOB_NODELIST", "other1"},
                                             {"SLURM_JOB_ID", "123456"}};
  auto e = read_launch_env(env_of(srun));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->launcher, "SLURM");
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->world_size, 8);  // the step's tasks, not the allocation's
  EXPECT_EQ(e->master_addr, "gpu007");
  EXPECT_EQ(e->master_from, "the first host of SLURM_STEP_NODELIST=gpu[007-010],cpu1");
  EXPECT_EQ(e->master_port, 15000 + 123456 % 15000);
  EXPECT_EQ(e->port_from, "SLURM_JOB_ID");
  EXPECT_EQ(e->nodes, 0);  // not said
  EXPECT_FALSE(e->agent_store);

  // Slurm's ports reserved for the step (MpiParams=ports) win over the job id's: no other
  // step on the node holds them.
  auto reserved = srun;
  reserved["SLURM_STEP_RESV_PORTS"] = "12007-12009";
  reserved["SLURM_STEP_NUM_NODES"] = "3";
  e = read_launch_env(env_of(reserved));
  EXPECT_EQ(e->master_port, 12007);
  EXPECT_EQ(e->port_from, "SLURM_STEP_RESV_PORTS");
  EXPECT_EQ(e->nodes, 3);
  reserved["SLURM_STEP_RESV_PORTS"] = "12011";
  EXPECT_EQ(read_launch_env(env_of(reserved))->master_port, 12011);
  reserved["SLURM_STEP_RESV_PORTS"] = "ports";
  EXPECT_THAT(config_error(env_of(reserved)), HasSubstr("SLURM_STEP_RESV_PORTS: expected a port range"));
  // Whatever the job id, the port it gives stays below Linux's default ephemeral range (32768-60999).
  for (const char* id : {"0", "14999", "15000", "29999", "987654321"}) {
    auto job = srun;
    job["SLURM_JOB_ID"] = id;
    const auto port = read_launch_env(env_of(job))->master_port;
    EXPECT_GE(port, 15000) << id;
    EXPECT_LT(port, 32768) << id;
  }

  auto explicit_master = srun;
  explicit_master["MASTER_ADDR"] = "10.0.0.1";
  explicit_master["MASTER_PORT"] = "12345";
  explicit_master["SLURM_STEP_RESV_PORTS"] = "12007-12009";
  e = read_launch_env(env_of(explicit_master));
  EXPECT_EQ(e->master_addr, "10.0.0.1");
  EXPECT_EQ(e->master_from, "MASTER_ADDR");
  EXPECT_EQ(e->master_port, 12345);
  EXPECT_EQ(e->port_from, "MASTER_PORT");

  // torchrun's variables win inside a SLURM allocation.
  auto both = srun;
  both.insert(kTorchrun.begin(), kTorchrun.end());
  EXPECT_EQ(read_launch_env(env_of(both))->launcher, "torchrun");

  // The batch script (no srun step) and one-task steps are single-process.
  EXPECT_FALSE(read_launch_env(env_of({{"SLURM_PROCID", "0"},
                                       {"SLURM_LOCALID", "0"},
                                       {"SLURM_NTASKS", "4"},
                                       {"SLURM_JOB_NODELIST", "a[1-2]"},
                                       {"SLURM_JOB_ID", "7"}})));
  auto single = srun;
  single["SLURM_STEP_NUM_TASKS"] = "1";
  single["SLURM_PROCID"] = "0";
  EXPECT_FALSE(read_launch_env(env_of(single)));

  auto no_nodes = srun;
  no_nodes.erase("SLURM_STEP_NODELIST");
  no_nodes.erase("SLURM_JOB_NODELIST");
  EXPECT_THAT(config_error(env_of(no_nodes)), HasSubstr("MASTER_ADDR: not set"));
  auto no_job = srun;
  no_job.erase("SLURM_JOB_ID");
  EXPECT_THAT(config_error(env_of(no_job)), HasSubstr("MASTER_PORT: not set"));
  auto bad_rank = srun;
  bad_rank["SLURM_PROCID"] = "8";
  EXPECT_THAT(config_error(env_of(bad_rank)), HasSubstr("SLURM_PROCID: 8 is not below SLURM_STEP_NUM_TASKS = 8"));
}

// The table of node lists (tests/fixtures/slurm_nodelists.json, checked against Slurm's
// own `scontrol show hostnames` by tests/python/distributed/test_nodelists.py): every
// host in order, the first as the master a step takes from its node list, and every
// refusal by name.
TEST(LaunchEnv, SlurmNodeListsFromTheTable) {
  const auto table = nlohmann::json::parse(test::slurp(test::source_path("tests/fixtures/slurm_nodelists.json")));
  ASSERT_GE(table["lists"].size(), 30u);
  for (const auto& row : table["lists"]) {
    const auto list = row["list"].get<std::string>();
    if (row.contains("refused")) {
      const auto e = test::error_of<ConfigError>([&] { slurm_hostnames(list); });
      EXPECT_THAT(e, HasSubstr("Slurm node list \"" + list + "\": ")) << list;
      EXPECT_THAT(e, HasSubstr(row["refused"].get<std::string>())) << list;
      continue;
    }
    const auto hosts = row["hosts"].get<std::vector<std::string>>();
    EXPECT_EQ(slurm_hostnames(list), hosts) << list;
    EXPECT_EQ(first_slurm_host(list), hosts.front()) << list;
    const auto e = read_launch_env(env_of({{"SLURM_PROCID", "1"},
                                           {"SLURM_LOCALID", "0"},
                                           {"SLURM_STEP_NUM_TASKS", "2"},
                                           {"SLURM_STEP_ID", "0"},
                                           {"SLURM_STEP_NODELIST", list},
                                           {"SLURM_JOB_ID", "42"}}));
    EXPECT_EQ(e->master_addr, hosts.front()) << list;
    EXPECT_EQ(slurm_hostnames(list, 2), std::vector<std::string>(hosts.begin(), hosts.begin() + std::min<size_t>(2, hosts.size())))
        << list;
  }
  // A list of a million hosts is not expanded to find its first.
  EXPECT_EQ(first_slurm_host("n[1-999999999]"), "n1");
}

// A host name that resolves to loopback only (localhost, or a node's own name in a
// default /etc/hosts) is refused on a job of several nodes, on every rank: each node would
// look for the store on itself. (A name that does not resolve at all is refused too:
// tests/python/distributed/test_master_address.py, in a network namespace of its own so
// that the failed lookup queries no outside server.)
TEST(MasterCheck, ALoopbackMasterIsRefusedOnlyWhereTheJobSpansSeveralNodes) {
  LaunchEnv e;
  e.launcher = "SLURM";
  e.world_size = 2;
  e.master_addr = "localhost";
  e.master_from = "the first host of SLURM_STEP_NODELIST=localhost,n2";
  e.master_port = 15001;
  e.port_from = "SLURM_JOB_ID";
  for (const int64_t nodes : {0, 1}) {
    e.nodes = nodes;
    EXPECT_NO_THROW(check_master_address(e)) << nodes;
  }
  e.nodes = 2;
  for (const int64_t rank : {0, 1}) {
    e.rank = rank;
    EXPECT_THAT(test::error_of<ConfigError>([&] { check_master_address(e); }),
                HasSubstr(fmt::format("rank {} of 2: the master address \"localhost\" (the first host of "
                                      "SLURM_STEP_NODELIST=localhost,n2) resolves to 127.0.0.1",
                                      rank)));
  }
  e.master_addr = "127.0.0.2";
  EXPECT_THAT(test::error_of<ConfigError>([&] { check_master_address(e); }), HasSubstr("a loopback address"));
}

TEST(DistOptions, FromEnvironment) {
  auto d = dist_options_from_env(env_of({}));
  EXPECT_EQ(d.backend, "auto");
  EXPECT_EQ(d.timeout, std::chrono::minutes(10));
  d = dist_options_from_env(env_of({{"XSAGPT_DIST_BACKEND", "gloo"}, {"XSAGPT_DIST_TIMEOUT", "2.5"}}));
  EXPECT_EQ(d.backend, "gloo");
  EXPECT_EQ(d.timeout, std::chrono::milliseconds(2500));
  EXPECT_THROW(dist_options_from_env(env_of({{"XSAGPT_DIST_BACKEND", "mpi"}})), ConfigError);
  EXPECT_THROW(dist_options_from_env(env_of({{"XSAGPT_DIST_TIMEOUT", "0"}})), ConfigError);
  EXPECT_THROW(dist_options_from_env(env_of({{"XSAGPT_DIST_TIMEOUT", "10s"}})), ConfigError);
}

TEST(ReplicaChecksum, MatchesItsDefinition) {
  torch::manual_seed(0);
  auto t = torch::randn({37, 5});
  t[3][2] = -0.0f;  // bit patterns, not values: -0 and 0 differ
  uint64_t s1 = 0, s2 = 0;
  const float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    int32_t bits;
    std::memcpy(&bits, p + i, 4);
    s1 += static_cast<uint64_t>(static_cast<int64_t>(bits));
    s2 += static_cast<uint64_t>(static_cast<int64_t>(bits) * static_cast<int64_t>(bits));
  }
  EXPECT_EQ(replica_checksum(t), std::make_pair(s1, s2));
  EXPECT_EQ(replica_checksum(t.t().contiguous().t()), replica_checksum(t));  // layout does not matter
  auto u = t.clone();
  u[3][2] = 0.0f;
  EXPECT_NE(replica_checksum(u), replica_checksum(t));
  auto b = t.to(torch::kBFloat16);  // 2-byte elements read as int16
  const auto* q = reinterpret_cast<const int16_t*>(b.data_ptr());
  uint64_t b1 = 0;
  for (int64_t i = 0; i < b.numel(); ++i) b1 += static_cast<uint64_t>(static_cast<int64_t>(q[i]));
  EXPECT_EQ(replica_checksum(b).first, b1);
}

TEST(DistContextBase, IsTheIdentity) {
  DistContext d;
  EXPECT_EQ(d.world_size(), 1);
  EXPECT_TRUE(d.is_main());
  auto x = torch::tensor(2.5);
  EXPECT_EQ(d.mean(x).item<double>(), 2.5);
  const nlohmann::json j = {{"a", 1}};
  const auto all = d.all_gather(j);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0], j);
  EXPECT_TRUE(d.any(true));
  EXPECT_FALSE(d.any(false));
  auto w = torch::ones({3}, torch::requires_grad());
  auto sync = d.gradient_sync({w});
  sync->backward((w * w).sum(), true);
  EXPECT_TRUE(torch::equal(w.grad(), 2 * torch::ones({3})));
  sync->zero_grad();
  EXPECT_FALSE(w.grad().defined());  // one process: set to none, nothing is kept
  std::vector<torch::Tensor> ts{torch::ones({2})};
  d.broadcast_from_owners(ts, {0});
  d.send_to_main(ts[0], 0);
  EXPECT_TRUE(torch::equal(ts[0], torch::ones({2})));
}

// ---- two Gloo ranks in two threads ----------------------------------------------

using test::run_ranks;

TEST(ProcessGroup, Collectives) {
  run_ranks(2, [](int r, ProcessGroupContext& d) {
    EXPECT_EQ(d.rank(), r);
    EXPECT_EQ(d.world_size(), 2);
    std::vector<torch::Tensor> ts{torch::full({3, 4}, r + 1.0), torch::full({5}, 10.0 * (r + 1), torch::kDouble)};
    d.broadcast(ts);
    EXPECT_TRUE(torch::equal(ts[0], torch::full({3, 4}, 1.0)));
    EXPECT_TRUE(torch::equal(ts[1], torch::full({5}, 10.0, torch::kDouble)));
    EXPECT_DOUBLE_EQ(d.mean(torch::tensor(r + 1.0, torch::kDouble)).item<double>(), 1.5);
    // Loader states of different lengths come back whole, in rank order.
    auto all = d.all_gather({{"rank", r}, {"pad", std::string(r * 100, 'x')}});
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0]["rank"], 0);
    EXPECT_EQ(all[1]["pad"].get<std::string>().size(), 100u);
    EXPECT_TRUE(d.any(r == 1));
    EXPECT_TRUE(d.any(r == 0));
    EXPECT_FALSE(d.any(false));
    d.barrier();
  });
}

TEST(ProcessGroup, ModelsThatDifferAreRefused) {
  EXPECT_THAT(
      [] {
        run_ranks(2, [](int r, ProcessGroupContext& d) {
          std::vector<torch::Tensor> ts{torch::zeros({4, 2 + r})};
          d.broadcast(ts);
        });
      },
      ::testing::ThrowsMessage<std::runtime_error>(HasSubstr(
          "rank(s) 1 built a different model than rank 0 (rank 1 has 1 tensors, rank 0 1; first difference at "
          "tensor #0: [\"Float\",[4,3]] vs [\"Float\",[4,2]])")));
}

// Gradients through the Reducer equal the float64 mean over ranks of each rank's
// accumulated micro-batch gradients; earlier micro-batches stay local.
TEST(ProcessGroup, GradientSyncAveragesAccumulatedGradients) {
  constexpr int kWorld = 2, kAccum = 3, kSteps = 3;
  // Parameters of 1 MB and more, so that the re-bucketing after the first step
  // (1 MB first bucket, then 25 MB) splits them into several buckets.
  // Own generators: the ranks are threads, and the global one is shared.
  auto make_params = [] {
    auto g = at::make_generator<at::CPUGeneratorImpl>(1);
    return std::vector<torch::Tensor>{
        torch::randn({16, 64}, g).requires_grad_(), torch::randn({512, 512}, g).requires_grad_(),
        torch::randn({64}, g).requires_grad_(), torch::randn({512, 600}, g).requires_grad_()};
  };
  auto batch = [](int step, int rank, int micro) {
    return torch::randn({4, 16}, at::make_generator<at::CPUGeneratorImpl>(1000 + 100 * step + 10 * rank + micro));
  };
  auto loss_of = [](const std::vector<torch::Tensor>& p, const torch::Tensor& x) {
    auto h = torch::tanh(torch::matmul(x, p[0]) + p[2]);                    // (4, 64)
    auto g = torch::matmul(torch::cat({h, h, h, h, h, h, h, h}, 1), p[1]);  // (4, 512)
    return torch::matmul(g, p[3]).pow(2).mean() / kAccum;
  };
  // Reference, in float64: the mean over ranks of each rank's summed micro-batch gradients.
  std::vector<std::vector<torch::Tensor>> expected(kSteps);
  for (int s = 0; s < kSteps; ++s) {
    auto p = make_params();
    std::vector<torch::Tensor> p64;
    for (auto& t : p) p64.push_back(t.detach().to(torch::kDouble).requires_grad_());
    for (int r = 0; r < kWorld; ++r)
      for (int m = 0; m < kAccum; ++m) (loss_of(p64, batch(s, r, m).to(torch::kDouble)) / kWorld).backward();
    for (auto& t : p64) expected[s].push_back(t.grad());
  }

  run_ranks(kWorld, [&](int r, ProcessGroupContext& d) {
    auto p = make_params();
    auto sync = d.gradient_sync(p);
    for (int s = 0; s < kSteps; ++s) {
      for (int m = 0; m < kAccum; ++m) {
        sync->backward(loss_of(p, batch(s, r, m)), m + 1 == kAccum);
        if (m == 0) {
          // Local only: this rank's gradient is not the average yet.
          auto local = d.all_gather({{"g", p[1].grad()[0][0].item<double>()}});
          EXPECT_NE(local[0]["g"], local[1]["g"]);
        }
      }
      for (size_t i = 0; i < p.size(); ++i) {
        auto err = (p[i].grad().to(torch::kDouble) - expected[s][i]).abs().max().item<double>();
        auto scale = expected[s][i].abs().max().item<double>();
        EXPECT_LT(err, 1e-5 * scale) << "step " << s << " param " << i;
      }
      sync->zero_grad();
    }
  });
}

// Distributed, gradients live in the Reducer's buckets from the first backward
// pass on, and zero_grad() zeroes them in place: no step allocates gradients
// again, not even the local first micro-batch. (Set to none, or replaced by
// fresh zeros, every step's first micro-batch would allocate a tensor per
// parameter beside the buckets.)
TEST(ProcessGroup, GradientsStayInTheBucketsAcrossSteps) {
  constexpr int kSteps = 4, kAccum = 2;
  run_ranks(2, [&](int r, ProcessGroupContext& d) {
    // Sizes that the re-bucketing (1 MB first bucket, then 25 MB) splits into two buckets.
    auto g = at::make_generator<at::CPUGeneratorImpl>(1);
    std::vector<torch::Tensor> p{torch::randn({16, 64}, g).requires_grad_(),
                                 torch::randn({512, 600}, g).requires_grad_(), torch::randn({64}, g).requires_grad_(),
                                 torch::randn({600, 8}, g).requires_grad_()};
    auto loss_of = [&](int seed) {
      auto x = torch::randn({4, 16}, at::make_generator<at::CPUGeneratorImpl>(100 * r + seed));
      auto h = torch::tanh(torch::matmul(x, p[0]) + p[2]).repeat({1, 8});  // (4, 512)
      return torch::matmul(torch::matmul(h, p[1]), p[3]).pow(2).mean();
    };
    auto storages = [&] {
      std::set<const c10::StorageImpl*> s;
      for (const auto& t : p) s.insert(t.grad().storage().unsafeGetStorageImpl());
      return s;
    };
    auto sync = d.gradient_sync(p);
    std::set<const c10::StorageImpl*> buckets;
    for (int s = 0; s < kSteps; ++s) {
      for (int m = 0; m < kAccum; ++m) {
        sync->backward(loss_of(10 * s + m), m + 1 == kAccum);
        if (m == 0) {
          EXPECT_LT(storages().size(), p.size()) << "step " << s;  // already in (shared) buckets
          if (s >= 2) {
            EXPECT_EQ(storages(), buckets) << "step " << s;  // the same buckets as the step before
          }
        }
      }
      buckets = storages();
      EXPECT_LT(buckets.size(), p.size());
      sync->zero_grad();
      if (s == 0) continue;  // (released before the re-bucketing at the next backward)
      for (const auto& t : p) {
        ASSERT_TRUE(t.grad().defined());
        EXPECT_EQ(t.grad().count_nonzero().item<int64_t>(), 0);
      }
      EXPECT_EQ(storages(), buckets);
    }
  });
}

TEST(ProcessGroup, CheckReplicatedNamesTheRankThatDiffers) {
  run_ranks(3, [](int r, ProcessGroupContext& d) {
    std::vector<torch::Tensor> same{torch::arange(10.0), torch::ones({2, 2})};
    d.check_replicated(same, "parameters");
    auto other = std::vector<torch::Tensor>{torch::arange(10.0), torch::ones({2, 2})};
    if (r == 2) other[1][1][0] = std::nextafter(1.0f, 2.0f);  // one ulp
    try {
      d.check_replicated(other, "parameters");
      ADD_FAILURE() << "rank " << r << ": no error";
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("parameters differ between ranks: rank(s) 2 hold other values than rank 0 "
                                      "(first in tensor #1 of 2, shape [2, 2])"));
    }
  });
}

TEST(ProcessGroup, StalledPeerTimesOutNamingRankAndOperation) {
  run_ranks(
      2,
      [](int r, ProcessGroupContext& d) {
        if (r == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // never joins the collective
          return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        try {
          d.barrier();
          ADD_FAILURE() << "barrier passed without rank 1";
        } catch (const std::runtime_error& e) {
          EXPECT_THAT(e.what(), HasSubstr("rank 0 of 2: barrier failed"));
          EXPECT_THAT(e.what(), HasSubstr("Ranks 1 failed to pass monitoredBarrier"));  // names the missing rank
        }
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
      },
      /*timeout_s=*/1.0);
}
