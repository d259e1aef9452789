// Subcommands of the xsagpt executable. Each takes the arguments after its name
// and returns the process exit code; errors are thrown and reported by main().
#pragma once

#include <string>
#include <vector>

namespace xsagpt::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

int info(int argc, char** argv);
int config_reference(int argc, char** argv);
int train(int argc, char** argv);
int sweep(int argc, char** argv);
int data(int argc, char** argv);
int bench_data(int argc, char** argv);
int tokenize(int argc, char** argv);
int analyze(int argc, char** argv);
int bench(int argc, char** argv);
int sample(int argc, char** argv);
int score(int argc, char** argv);
int eval(int argc, char** argv);

const std::vector<Command>& commands();

}  // namespace xsagpt::cli
