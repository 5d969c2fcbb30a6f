// Pure CUDA twin of the graph-memset repro: no PyTorch, no cuBLAS, only the runtime API.
//
// Captures `ops` operations into one CUDA graph per variant and times graph replays:
//   memset       ops x cudaMemsetAsync(4 bytes)          -> ops memset nodes
//   fill         ops x fill_kernel<<<1, 32>>> (one int)   -> ops kernel nodes
//   work_only    ops x work_kernel                        -> the stand-in for the matmul alone
//   memset_work  ops x {cudaMemsetAsync, work_kernel}
//   fill_work    ops x {fill_kernel, work_kernel}
//   seed_memset  ops x cudaMemsetAsync(4 bytes), one replay timed at a time (the seed's program)
//   seed_fill    ops x fill_kernel<<<1, 1>>>, one replay timed at a time (the seed's program)
// work_kernel is a few microseconds of FMA work over a 4 MiB buffer. It stands in for the
// Python side's interleaved matmul so that the twin builds with nvcc alone (no cuBLAS).
//
// The seed_* variants re-implement the program posted with the claim: 1000 one-thread kernels
// or 4-byte memsets captured into a graph, replayed on a second stream, and timed with a host
// clock around one launch and cudaDeviceSynchronize (launch cost and the idle GPU's wake-up
// included). Each of their samples is one such measurement; the other variants time replays
// back to back with events, which measures the nodes' execution alone.
//
// Each replay is bracketed by CUDA events recorded on the same stream; all replays of a
// block are queued before the host waits, so the GPU never idles between them. Variants
// are interleaved in rounds so that clock drift spreads over all of them alike. Rounds come
// in episodes separated by an idle gap (--episodes, --gap-ms), each episode starting with a
// short untimed warm-up: the GPU leaves its power state in the gap, so the episodes sample
// the states that separate processes would land in (the host's CI covers their medians).
//
// --variants (a comma-separated list of the names above) runs only those; --work-replays sets the
// replays of the three work-kernel variants (default: --replays), which take about a hundred
// times longer per replay than the others, and scales their warm-up replays alike. Each variant's
// replays are split evenly over the rounds (per_round for --replays, work_per_round for
// --work-replays).
//
// Output: one JSON object on stdout with the raw per-replay samples of every variant run, in
// seconds per op (replay time / ops). Errors go to stderr with a non-zero exit code.

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    if (err_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "graph_memset: %s failed at line %d: %s (%s)\n", #call, __LINE__, \
                   cudaGetErrorName(err_), cudaGetErrorString(err_));                        \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

__global__ void fill_kernel(int* flag, int value) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *flag = value;
  }
}

__global__ void work_kernel(float* x, int n, int iters) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = x[i];
    for (int k = 0; k < iters; ++k) {
      v = fmaf(v, 0.999f, 0.001f);
    }
    x[i] = v;
  }
}

enum class Op { kNone, kMemset, kFill };

struct Variant {
  const char* name;
  Op op;
  bool work;
  int threads;  // of each fill_kernel launch
  bool seed;    // timed as the seed's program times it: one replay, host clock, device synchronize
  cudaGraphExec_t exec;
  std::vector<double> samples;
  int replays = 0;    // timed replays in all, and per round
  int per_round = 0;
  int warmup = 0;     // untimed replays at the start and after each idle gap
};

struct Options {
  int device = 0;
  int ops = 1000;
  int replays = 500;
  int warmup = 20;
  int rounds = 10;
  int episodes = 1;
  int gap_ms = 0;
  int work_n = 1 << 20;
  int work_iters = 128;
  int work_replays = -1;  // -1: as many as --replays
  std::string variants;   // comma-separated names; empty: all
};

static int parse_positive(const char* flag, const char* text) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > (1L << 30)) {
    std::fprintf(stderr, "graph_memset: %s %s: expected a non-negative integer\n", flag, text);
    std::exit(2);
  }
  return static_cast<int>(value);
}

static Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "graph_memset: %s: expected a value after it\n", a);
      std::exit(2);
    }
    const char* v = argv[++i];
    if (!std::strcmp(a, "--device")) o.device = parse_positive(a, v);
    else if (!std::strcmp(a, "--ops")) o.ops = parse_positive(a, v);
    else if (!std::strcmp(a, "--replays")) o.replays = parse_positive(a, v);
    else if (!std::strcmp(a, "--warmup")) o.warmup = parse_positive(a, v);
    else if (!std::strcmp(a, "--rounds")) o.rounds = parse_positive(a, v);
    else if (!std::strcmp(a, "--work-n")) o.work_n = parse_positive(a, v);
    else if (!std::strcmp(a, "--work-iters")) o.work_iters = parse_positive(a, v);
    else if (!std::strcmp(a, "--episodes")) o.episodes = parse_positive(a, v);
    else if (!std::strcmp(a, "--gap-ms")) o.gap_ms = parse_positive(a, v);
    else if (!std::strcmp(a, "--work-replays")) o.work_replays = parse_positive(a, v);
    else if (!std::strcmp(a, "--variants")) o.variants = v;
    else {
      std::fprintf(stderr,
                   "graph_memset: unknown option %s; known: --device --ops --replays --warmup "
                   "--rounds --work-n --work-iters --episodes --gap-ms --work-replays --variants\n",
                   a);
      std::exit(2);
    }
  }
  if (o.work_replays < 0) o.work_replays = o.replays;
  if (o.ops < 1 || o.replays < 1 || o.rounds < 1 || o.work_n < 1 || o.episodes < 1 || o.work_replays < 1) {
    std::fprintf(stderr,
                 "graph_memset: --ops, --replays, --work-replays, --rounds, --work-n and --episodes must be >= 1\n");
    std::exit(2);
  }
  if (o.rounds > o.replays) o.rounds = o.replays;
  if (o.episodes > o.rounds) o.episodes = o.rounds;
  return o;
}

static cudaGraphExec_t capture(cudaStream_t s, const Variant& v, const Options& o, int* flag,
                               float* buf, int grid) {
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < o.ops; ++i) {
    if (v.op == Op::kMemset) {
      CHECK(cudaMemsetAsync(flag, 0, sizeof(int), s));
    } else if (v.op == Op::kFill) {
      fill_kernel<<<1, v.threads, 0, s>>>(flag, 0);
      CHECK(cudaGetLastError());
    }
    if (v.work) {
      work_kernel<<<grid, 256, 0, s>>>(buf, o.work_n, o.work_iters);
      CHECK(cudaGetLastError());
    }
  }
  CHECK(cudaStreamEndCapture(s, &graph));
  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  if (nodes == 0) {
    std::fprintf(stderr, "graph_memset: variant %s captured an empty graph\n", v.name);
    std::exit(1);
  }
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphDestroy(graph));
  return exec;
}

// Times `count` back-to-back replays; appends seconds per op for each.
static void time_block(cudaStream_t s, Variant& v, int count, int ops,
                       std::vector<cudaEvent_t>& events) {
  CHECK(cudaEventRecord(events[0], s));
  for (int i = 0; i < count; ++i) {
    CHECK(cudaGraphLaunch(v.exec, s));
    CHECK(cudaEventRecord(events[i + 1], s));
  }
  CHECK(cudaEventSynchronize(events[count]));
  for (int i = 0; i < count; ++i) {
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
    v.samples.push_back(static_cast<double>(ms) / 1e3 / ops);
  }
}

// The seed's timing: each replay alone, from an idle device, a host clock around launch and
// cudaDeviceSynchronize; appends seconds per op for each.
static void time_seed(cudaStream_t s, Variant& v, int count, int ops) {
  for (int i = 0; i < count; ++i) {
    CHECK(cudaDeviceSynchronize());
    auto tic = std::chrono::steady_clock::now();
    CHECK(cudaGraphLaunch(v.exec, s));
    CHECK(cudaDeviceSynchronize());
    auto toc = std::chrono::steady_clock::now();
    v.samples.push_back(std::chrono::duration<double>(toc - tic).count() / ops);
  }
}

static void json_string(const char* s) {
  std::putchar('"');
  for (; *s; ++s) {
    unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      std::printf("\\%c", c);
    } else if (c < 0x20) {
      std::printf("\\u%04x", c);
    } else {
      std::putchar(c);
    }
  }
  std::putchar('"');
}

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  CHECK(cudaSetDevice(o.device));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, o.device));
  int runtime_version = 0, driver_version = 0;
  CHECK(cudaRuntimeGetVersion(&runtime_version));
  CHECK(cudaDriverGetVersion(&driver_version));

  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* flag = nullptr;
  float* buf = nullptr;
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMalloc(&buf, sizeof(float) * static_cast<size_t>(o.work_n)));
  CHECK(cudaMemset(buf, 0, sizeof(float) * static_cast<size_t>(o.work_n)));
  int grid = 2 * prop.multiProcessorCount;

  std::vector<Variant> variants = {
      {"memset", Op::kMemset, false, 32, false, nullptr, {}},
      {"fill", Op::kFill, false, 32, false, nullptr, {}},
      {"work_only", Op::kNone, true, 32, false, nullptr, {}},
      {"memset_work", Op::kMemset, true, 32, false, nullptr, {}},
      {"fill_work", Op::kFill, true, 32, false, nullptr, {}},
      {"seed_memset", Op::kMemset, false, 1, true, nullptr, {}},
      {"seed_fill", Op::kFill, false, 1, true, nullptr, {}},
  };
  if (!o.variants.empty()) {  // keep the named variants, in the order above
    std::string names = "," + o.variants + ",";
    std::vector<Variant> kept;
    for (auto& v : variants) {
      std::string key = std::string(",") + v.name + ",";
      size_t at = names.find(key);
      if (at != std::string::npos) {
        kept.push_back(v);
        names.erase(at, key.size() - 1);
      }
    }
    if (names.find_first_not_of(',') != std::string::npos || kept.empty()) {
      std::fprintf(stderr,
                   "graph_memset: --variants %s: expected names from memset, fill, work_only, memset_work, "
                   "fill_work, seed_memset, seed_fill, each at most once\n",
                   o.variants.c_str());
      return 2;
    }
    variants = kept;
  }
  int per_round = (o.replays + o.rounds - 1) / o.rounds;
  int work_per_round = (o.work_replays + o.rounds - 1) / o.rounds;
  // The work-kernel variants warm up with the share of --warmup that --work-replays is of
  // --replays (at least one replay): about a hundred times longer per replay, 20 of them after
  // each gap took 0.2 s each, while one already keeps the GPU busy longer than 20 plain replays.
  long long scaled = (static_cast<long long>(o.warmup) * o.work_replays + o.replays - 1) / o.replays;
  int work_warmup = static_cast<int>(scaled < o.warmup ? scaled : o.warmup);
  for (auto& v : variants) {
    v.replays = v.work ? o.work_replays : o.replays;
    v.per_round = v.work ? work_per_round : per_round;
    v.warmup = v.work ? work_warmup : o.warmup;
  }
  // The seed replays on a stream other than the one it captured on.
  cudaStream_t replay_stream;
  CHECK(cudaStreamCreateWithFlags(&replay_stream, cudaStreamNonBlocking));
  for (auto& v : variants) {
    v.exec = capture(s, v, o, flag, buf, grid);
    for (int i = 0; i < v.warmup; ++i) CHECK(cudaGraphLaunch(v.exec, s));
    CHECK(cudaStreamSynchronize(s));
    v.samples.reserve(v.replays);
  }

  // Correctness: one replay of a memset graph (the first one run) must clear a flag set to a
  // non-zero value.
  for (auto& v : variants) {
    if (v.op != Op::kMemset) continue;
    CHECK(cudaMemsetAsync(flag, 0x7f, sizeof(int), s));
    CHECK(cudaGraphLaunch(v.exec, s));
    int host_flag = -1;
    CHECK(cudaMemcpyAsync(&host_flag, flag, sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    if (host_flag != 0) {
      std::fprintf(stderr, "graph_memset: %s graph left the flag at %d, expected 0\n", v.name, host_flag);
      return 1;
    }
    break;
  }

  std::vector<cudaEvent_t> events((per_round > work_per_round ? per_round : work_per_round) + 1);
  for (auto& e : events) CHECK(cudaEventCreate(&e));
  // Rounds alternate the variants' order (forward, then reversed), so no variant always
  // runs first after a round boundary; the host splits each variant's samples into rounds
  // of its per_round replays and pairs them round by round.
  int episode_rounds = (o.rounds + o.episodes - 1) / o.episodes;
  for (int r = 0; r < o.rounds; ++r) {
    if (r > 0 && r % episode_rounds == 0) {
      // Idle gap, then the episode's own untimed warm-up of every variant.
      CHECK(cudaStreamSynchronize(s));
      struct timespec gap = {o.gap_ms / 1000, (o.gap_ms % 1000) * 1000000L};
      nanosleep(&gap, nullptr);
      for (auto& v : variants) {
        for (int i = 0; i < v.warmup; ++i) CHECK(cudaGraphLaunch(v.exec, s));
      }
      CHECK(cudaStreamSynchronize(s));
    }
    for (size_t k = 0; k < variants.size(); ++k) {
      auto& v = variants[(r % 2) ? variants.size() - 1 - k : k];
      int remaining = v.replays - static_cast<int>(v.samples.size());
      int count = remaining < v.per_round ? remaining : v.per_round;
      if (count > 0 && v.seed) time_seed(replay_stream, v, count, o.ops);
      else if (count > 0) time_block(s, v, count, o.ops, events);
    }
  }

  std::printf("{\"schema\": \"gpu-repro.graph_memset_twin/1\", \"device\": ");
  json_string(prop.name);
  std::printf(", \"compute_capability\": \"%d.%d\", \"cuda_runtime\": %d, \"cuda_driver\": %d",
              prop.major, prop.minor, runtime_version, driver_version);
  std::printf(", \"ops\": %d, \"replays\": %d, \"warmup\": %d, \"rounds\": %d, \"per_round\": %d", o.ops,
              o.replays, o.warmup, o.rounds, per_round);
  std::printf(", \"episodes\": %d, \"episode_rounds\": %d, \"gap_ms\": %d", o.episodes, episode_rounds, o.gap_ms);
  std::printf(", \"work_replays\": %d, \"work_per_round\": %d, \"work_warmup\": %d", o.work_replays, work_per_round,
              work_warmup);
  std::printf(", \"work_n\": %d, \"work_iters\": %d, \"unit\": \"s/op\", \"variants\": {", o.work_n,
              o.work_iters);
  for (size_t k = 0; k < variants.size(); ++k) {
    std::printf("%s\"%s\": [", k ? ", " : "", variants[k].name);
    for (size_t i = 0; i < variants[k].samples.size(); ++i) {
      std::printf("%s%.9e", i ? ", " : "", variants[k].samples[i]);
    }
    std::printf("]");
  }
  std::printf("}}\n");

  for (auto& e : events) CHECK(cudaEventDestroy(e));
  for (auto& v : variants) CHECK(cudaGraphExecDestroy(v.exec));
  CHECK(cudaFree(buf));
  CHECK(cudaFree(flag));
  CHECK(cudaStreamDestroy(replay_stream));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
