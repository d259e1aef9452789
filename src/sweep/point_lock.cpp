// A point's lock: numbered generations created by link(2), a heartbeat rewritten by
// rename(2) (see point_lock.h).
#include "sweep/point_lock.h"

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_read.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <signal.h>
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

// The generations present in `dir`, ascending; temporaries and anything else skipped.
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
  std::ifstream in(file);
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

// A generation file as its holder; one that is not a holder's JSON (damaged by hand)
// is an unknown holder whose heartbeat is the file's modification time, so that it
// goes stale like any other.
std::optional<PointHolder> read_generation(const fs::path& dir, int64_t g) {
  const auto file = generation_file(dir, g);
  std::ifstream in(file);
  if (!in) return std::nullopt;  // removed since the listing
  std::string text(64 * 1024, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  const auto j = parse_json_or_discarded(text);
  if (j.is_object() && j.value("pid", json()).is_number_integer() && j.value("heartbeat", json()).is_number())
    return PointHolder::of(j, g);
  PointHolder unknown;
  unknown.generation = g;
  unknown.host = "an unknown host (its lock file is unreadable)";
  std::error_code ec;
  const auto mtime = fs::last_write_time(file, ec);
  if (!ec)
    unknown.heartbeat =
        std::chrono::duration<double>(std::chrono::file_clock::to_sys(mtime).time_since_epoch()).count();
  return unknown;
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

std::optional<PointHolder> read_point_lock(const fs::path& dir) {
  auto gens = generations(dir);
  // The highest is removed only by nobody (see point_lock.h), but a listing may race a
  // taker that removes the ones below it: read from the top down.
  for (auto it = gens.rbegin(); it != gens.rend(); ++it)
    if (auto h = read_generation(dir, *it)) return h;
  return std::nullopt;
}

std::optional<std::string> stale_reason(const PointHolder& h, const PointLockTiming& timing, double now) {
  if (!h.boot_id.empty() && h.pid > 0) {
    const auto me = this_process();
    if (h.host == me.host && h.boot_id == me.boot_id && ::kill(static_cast<pid_t>(h.pid), 0) != 0 &&
        errno == ESRCH)
      return fmt::format("its process (pid {}) is gone from this machine", h.pid);
  }
  const double age = now - h.heartbeat;
  if (age > timing.stale_s)
    return fmt::format("its last heartbeat is {:.0f} s old (stale after {:g} s)", age, timing.stale_s);
  return std::nullopt;
}

// The heartbeat: a thread that rewrites this generation's file with the time, and
// stops (marking the lock lost) once a higher generation appears or its file is gone.
struct PointLock::Beat {
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;
};

PointLock::PointLock(fs::path dir, PointHolder me, const PointLockTiming& timing)
    : dir_(std::move(dir)), me_(std::move(me)), lost_(std::make_shared<std::atomic<bool>>(false)),
      beat_(std::make_unique<Beat>()) {
  // The thread keeps its own copy of the holder: only it rewrites the heartbeat.
  beat_->thread = std::thread([this, me = me_, period = timing.heartbeat_s]() mutable {
    std::unique_lock<std::mutex> g(beat_->m);
    const auto wait = std::chrono::duration<double>(period);
    while (!beat_->cv.wait_for(g, wait, [&] { return beat_->stop; })) {
      const auto gens = generations(dir_);
      const auto now_held = read_generation(dir_, me.generation);
      if (gens.empty() || gens.back() != me.generation || !now_held || now_held->token != me.token) {
        const auto other = read_point_lock(dir_);
        spdlog::error("the lock of {} was taken over by {} while this process held it (it stalled past the "
                      "staleness threshold); two processes may now train this point",
                      dir_.string(), other ? other->describe() : "another process");
        lost_->store(true);
        return;
      }
      me.heartbeat = seconds_now();
      try {
        write_generation(dir_, me);
      } catch (const std::exception& e) {
        spdlog::warn("cannot refresh the heartbeat of {}: {}", dir_.string(), e.what());
      }
    }
  });
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

PointLock::Attempt PointLock::acquire(const fs::path& dir, const PointLockTiming& timing) {
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
        const auto stale = stale_reason(*top, timing, seconds_now());
        if (!stale) {
          a.holder = top;
          return a;
        }
        why = *stale;
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
