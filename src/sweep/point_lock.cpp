// A point's lock: numbered generations created by link(2), a heartbeat rewritten by
// rename(2), staleness by the file system's own clock (see point_lock.h).
#include "sweep/point_lock.h"

#include "util/atomic_file.h"
#include "util/dir_lock.h"
#include "util/error.h"
#include "util/json_read.h"
#include "util/regular_file.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace xsagpt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

fs::path generation_file(const fs::path& dir, int64_t g) { return dir / fmt::format("{:012d}.json", g); }

// The generations present in `dir`, ascending; temporaries, probes and anything else skipped.
std::vector<int64_t> generations(const fs::path& dir) {
  std::vector<int64_t> gens;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.size() != 17 || name.substr(12) != ".json" ||
        !std::all_of(name.begin(), name.begin() + 12, [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    gens.push_back(std::stoll(name.substr(0, 12)));
  }
  std::sort(gens.begin(), gens.end());
  return gens;
}

std::string first_line_of(const char* file) {
  auto in = open_state_file(file);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string utc_text(double t) {
  const auto secs = static_cast<std::time_t>(t);
  char buf[32] = {};
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&secs));
  return buf;
}

std::string random_token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}", rd(), rd());
}

double stamp_seconds(const struct stat& st) {
  return static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
}

// A generation file as its holder, stamped with the file's modification time (fstat of
// the opened file: on NFS, open revalidates what the client caches). One that is not a
// holder's JSON (damaged by hand) is an unknown holder, which goes stale like any other.
std::optional<PointHolder> read_generation(const fs::path& dir, int64_t g) {
  const auto file = generation_file(dir, g);
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;  // removed since the listing
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    text.resize(64 * 1024);
    const ssize_t n = ::read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  const auto j = parse_json_or_discarded(text);
  PointHolder h;
  if (j.is_object() && j.value("pid", json()).is_number_integer() && j.value("heartbeat", json()).is_number()) {
    h = PointHolder::of(j, g);
  } else {
    h.generation = g;
    h.host = "an unknown host (its lock file is unreadable)";
  }
  h.stamped = stamp_seconds(st);
  return h;
}

void write_generation(const fs::path& dir, const PointHolder& h) {
  write_file_atomic_shared(generation_file(dir, h.generation), h.to_json().dump() + "\n");
}

}  // namespace

PointLockTiming point_lock_timing() {
  PointLockTiming t;
  if (const char* env = std::getenv("XSAGPT_POINT_LOCK_STALE_S")) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(v > 0) || v > 1e9)
      throw ConfigError(
          fmt::format("XSAGPT_POINT_LOCK_STALE_S: expected a positive number of seconds, got \"{}\"", env));
    t.stale_s = v;
  }
  t.heartbeat_s = std::clamp(t.stale_s / 5, 0.05, 30.0);
  return t;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

PointHolder PointHolder::of(const json& j, int64_t generation) {
  PointHolder h;
  h.generation = generation;
  auto str = [&](const char* k) { return j.value(k, json()).is_string() ? j[k].get<std::string>() : std::string(); };
  h.host = str("host");
  h.boot_id = str("boot_id");
  h.job = str("job");
  h.token = str("token");
  h.since = str("since");
  h.pid = j["pid"].get<int64_t>();
  h.heartbeat = j["heartbeat"].get<double>();
  h.released = j.value("released", json(false)) == json(true);
  return h;
}

json PointHolder::to_json() const {
  return {{"host", host}, {"pid", pid},           {"job", job},           {"boot_id", boot_id},
          {"token", token}, {"since", since},     {"heartbeat", heartbeat}, {"heartbeat_utc", utc_text(heartbeat)},
          {"released", released}};
}

std::string PointHolder::describe() const {
  if (pid == 0) return host;
  return fmt::format("pid {} on host {}{}{}", pid, host, job.empty() ? "" : " (job " + job + ")",
                     since.empty() ? "" : ", since " + since);
}

PointHolder this_process() {
  PointHolder h;
  char host[256] = {};
  h.host = ::gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string("unknown host");
  h.boot_id = first_line_of("/proc/sys/kernel/random/boot_id");
  h.pid = ::getpid();
  const char* array = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
  const char* job = std::getenv("SLURM_JOB_ID");
  if (array && task && *array && *task)
    h.job = fmt::format("{}_{}", array, task);
  else if (job)
    h.job = job;
  h.token = random_token();
  h.heartbeat = seconds_now();
  h.since = utc_text(h.heartbeat);
  return h;
}

fs::path point_lock_dir(const fs::path& sweep_dir, const std::string& point) { return sweep_dir / ".locks" / point; }

LockClock LockClock::of(const fs::path& dir) {
  const auto probe = dir / fmt::format(".probe-{}-{}", ::getpid(), random_token());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return {seconds_now(), false};
  struct stat st {};
  const bool stamped = ::fstat(fd, &st) == 0;  // created: stamped by the file system, as a heartbeat's file is
  ::close(fd);
  ::unlink(probe.c_str());
  if (!stamped) return {seconds_now(), false};
  return {stamp_seconds(st), true};
}

std::optional<PointHolder> read_point_lock(const fs::path& dir) {
  auto gens = generations(dir);
  // The highest is removed only by nobody (see point_lock.h), but a listing may race a
  // taker that removes the ones below it: read from the top down.
  for (auto it = gens.rbegin(); it != gens.rend(); ++it)
    if (auto h = read_generation(dir, *it)) return h;
  return std::nullopt;
}

HolderCheck check_holder(const PointHolder& h, const PointLockTiming& timing, const LockClock& clock,
                         const fs::path& run_dir) {
  HolderCheck c;
  c.age = clock.now - h.stamped;
  if (!h.boot_id.empty() && h.pid > 0) {
    const auto me = this_process();
    if (h.host == me.host && h.boot_id == me.boot_id && ::kill(static_cast<pid_t>(h.pid), 0) != 0 &&
        errno == ESRCH) {
      c.live = false;
      c.why = fmt::format("its process (pid {}) is gone from this machine", h.pid);
      return c;
    }
  }
  const char* clock_name = clock.probed ? "" : " by this host's clock (the lock folder cannot be written)";
  if (c.age > timing.stale_s)
    c.why = fmt::format("its last heartbeat is {:.0f} s old{} (stale after {:g} s)", c.age, clock_name,
                        timing.stale_s);
  else if (-c.age > timing.stale_s)
    c.why = fmt::format("its lock file is stamped {:.0f} s in the future{}, which no heartbeat does (a live holder "
                        "restamps it every {:g} s; stale after {:g} s)",
                        -c.age, clock_name, timing.heartbeat_s, timing.stale_s);
  if (c.why.empty()) return c;
  // Stopped beating; but a process that still holds the point's run directory is alive.
  if (const auto runner = DirLock::holder(run_dir)) {
    c.why = fmt::format("its heartbeat stopped past the {:g} s threshold, but {} still holds its run directory "
                        "(stopped or stalled: it goes on when continued)",
                        timing.stale_s, *runner);
    return c;
  }
  c.live = false;
  return c;
}

// The heartbeat: a thread that rewrites this generation's file with the time, and
// stops (marking the lock lost) once a higher generation appears or its file is gone.
struct PointLock::Beat {
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;
};

namespace {

// Whether `me`'s generation is still in `dir`, its own and the highest.
bool still_ours(const fs::path& dir, const PointHolder& me) {
  const auto gens = generations(dir);
  const auto now_held = read_generation(dir, me.generation);
  return !gens.empty() && gens.back() == me.generation && now_held && now_held->token == me.token;
}

// Says once that the point was lost, and to whom.
void report_lost(const fs::path& dir, std::atomic<bool>& lost) {
  if (lost.exchange(true)) return;
  const auto other = read_point_lock(dir);
  spdlog::error("lost the point: its lock {} now names {}, which took the point over while this process stalled "
                "past the staleness threshold; it writes nothing more into the point's run",
                dir.string(), other ? other->describe() : "another process");
}

}  // namespace

PointLock::PointLock(fs::path dir, PointHolder me, const PointLockTiming& timing)
    : dir_(std::move(dir)), me_(std::move(me)), lost_(std::make_shared<std::atomic<bool>>(false)),
      beat_(std::make_unique<Beat>()) {
  // The thread keeps its own copy of the holder: only it rewrites the heartbeat.
  beat_->thread = std::thread([this, me = me_, period = timing.heartbeat_s]() mutable {
    std::unique_lock<std::mutex> g(beat_->m);
    const auto wait = std::chrono::duration<double>(period);
    while (!beat_->cv.wait_for(g, wait, [&] { return beat_->stop; })) {
      if (lost_->load()) return;
      if (!still_ours(dir_, me)) return report_lost(dir_, *lost_);
      me.heartbeat = seconds_now();
      try {
        write_generation(dir_, me);
      } catch (const std::exception& e) {
        spdlog::warn("cannot refresh the heartbeat of {}: {}", dir_.string(), e.what());
      }
    }
  });
}

bool PointLock::held() {
  if (lost_->load()) return false;
  if (still_ours(dir_, me_)) return true;
  report_lost(dir_, *lost_);
  return false;
}

PointLock::~PointLock() {
  {
    std::lock_guard<std::mutex> g(beat_->m);
    beat_->stop = true;
  }
  beat_->cv.notify_all();
  beat_->thread.join();
  if (lost()) return;  // the generation is another process's business now
  me_.released = true;
  me_.heartbeat = seconds_now();
  try {
    write_generation(dir_, me_);
  } catch (const std::exception& e) {
    spdlog::warn("cannot release the lock {}: {} (it goes stale instead)", dir_.string(), e.what());
  }
}

PointLock::Attempt PointLock::acquire(const fs::path& dir, const PointLockTiming& timing, const fs::path& run_dir) {
  fs::create_directories(dir);
  Attempt a;
  // Each turn either takes the next generation or finds a live holder; a turn lost to
  // another creator looks again (a few times: every loss means someone else moved).
  for (int turn = 0; turn < 16; ++turn) {
    const auto gens = generations(dir);
    int64_t next = 0;
    std::optional<PointHolder> top;
    std::string why;
    if (!gens.empty()) {
      top = read_generation(dir, gens.back());
      if (!top) continue;  // removed between the listing and the read: look again
      if (!top->released) {
        const auto check = check_holder(*top, timing, LockClock::of(dir), run_dir);
        if (check.live) {
          a.holder = top;
          a.holder_check = check;
          return a;
        }
        why = check.why;
      }
      next = gens.back() + 1;
    }
    auto me = this_process();
    me.generation = next;
    if (!create_file_exclusive(generation_file(dir, next), me.to_json().dump() + "\n")) continue;
    // A listing that missed the top generation (an NFS client's stale cache) could
    // have let this one in below it: only the highest generation holds.
    const auto now = generations(dir);
    if (!now.empty() && now.back() > next) {
      std::error_code ec;
      fs::remove(generation_file(dir, next), ec);
      continue;
    }
    for (const auto g : now)
      if (g < next) {
        std::error_code ec;
        fs::remove(generation_file(dir, g), ec);
      }
    if (top && !top->released) {
      a.taken_over = top;
      a.stale_why = why;
    }
    a.lock.reset(new PointLock(dir, me, timing));
    return a;
  }
  // Sixteen turns each lost to another creator: someone holds it by now.
  if (auto h = read_point_lock(dir)) a.holder = h;
  if (!a.holder) a.holder = PointHolder{.host = "another process"};
  return a;
}

}  // namespace xsagpt
