// Subcommands of the `specserve` command-line tool. Each returns a process
// exit code and prints its own errors.
#pragma once

namespace specserve::cli {

int Generate(int argc, char** argv);
int Tokenize(int argc, char** argv);
int Inspect(int argc, char** argv);
int Bench(int argc, char** argv);
int SpecBench(int argc, char** argv);
int Client(int argc, char** argv);
int ServeBench(int argc, char** argv);
int Inflate(int argc, char** argv);
int DumpFeatures(int argc, char** argv);
int EagleBench(int argc, char** argv);
int ConstrainBench(int argc, char** argv);

}  // namespace specserve::cli
