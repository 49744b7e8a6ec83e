// Runs a C++ interval pub/sub matcher of the xizeroplus/matching-algorithm collection (Rein or Tama) on
// a workload file of `bench pubsub` and prints one JSON object: build time, mean insert time, match time
// per event (CPU time), the matches of every event, and the memory the matcher took.  This driver is ours; the
// matcher's sources are not in this repository.  Build it against a checkout of the collection
// (bench/pubsub.py's docstring has the commands):
//   g++ -O3 -march=native -std=c++17 -DRIVAL_REIN -I$SRC/Rein pubsub_driver.cpp $SRC/Rein/rein.cpp ...
// Memory: resident set size from /proc/self/status, the peak reset (clear_refs) once the workload is
// read, so "peak above loaded" is what building and matching took.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#if defined(RIVAL_REIN)
#include "rein.h"
static const char *NAME = "Rein";
#elif defined(RIVAL_TAMA)
#include "tama.h"
static const char *NAME = "Tama";
static const int TAMA_LEVEL = 13;  // the collection's own setting
#else
#error "define RIVAL_REIN or RIVAL_TAMA"
#endif

static long status_kib(const char *key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(key, 0) == 0) return std::stol(line.substr(line.find(':') + 1));
    return -1;
}

// CPU time of the process, as bench pubsub measures ours: the machine may be shared.
static double cpu_seconds() {
    timespec now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return now.tv_sec + 1e-9 * now.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s WORKLOAD\n", argv[0]);
        return 2;
    }
    std::ifstream in(argv[1]);
    int subs, pubs, atts, dom;
    if (!(in >> subs >> pubs >> atts >> dom)) {
        std::fprintf(stderr, "%s: cannot read the header\n", argv[1]);
        return 2;
    }
    std::vector<IntervalSub> subList(subs);
    for (int i = 0; i < subs; i++) {
        int k;
        in >> k;
        subList[i].id = i;
        subList[i].size = k;
        subList[i].constraints.resize(k);
        for (auto &c : subList[i].constraints) in >> c.att >> c.lowValue >> c.highValue;
    }
    std::vector<Pub> pubList(pubs);
    for (int i = 0; i < pubs; i++) {
        int k;
        in >> k;
        pubList[i].size = k;
        pubList[i].pairs.resize(k);
        for (auto &p : pubList[i].pairs) in >> p.att >> p.value;
    }
    if (!in) {
        std::fprintf(stderr, "%s: truncated workload\n", argv[1]);
        return 2;
    }
    long loaded = status_kib("VmRSS:");
    { std::ofstream reset("/proc/self/clear_refs"); reset << "5"; }
    double start = cpu_seconds();
#if defined(RIVAL_REIN)
    Rein *index = new Rein(dom);
#else
    Tama *index = new Tama(atts, dom, TAMA_LEVEL);
#endif
    for (auto &s : subList) index->insert(s);
    double build = cpu_seconds() - start;
    std::vector<int> matches(pubs);
    start = cpu_seconds();
    for (int i = 0; i < pubs; i++) {
        int found = 0;
        index->match(pubList[i], found, subList);
        matches[i] = found;
    }
    double match = cpu_seconds() - start;
    long peak = status_kib("VmHWM:");
    std::printf("{\"name\": \"%s\", \"subs\": %d, \"events\": %d, \"build_s\": %.6f, \"insert_ms\": %.6f, "
                "\"match_ms\": %.6f, \"rss_loaded_kib\": %ld, \"peak_rss_kib\": %ld, \"matches\": [",
                NAME, subs, pubs, build, 1e3 * build / subs, 1e3 * match / pubs, loaded, peak);
    for (int i = 0; i < pubs; i++) std::printf("%s%d", i ? ", " : "", matches[i]);
    std::printf("]}\n");
    return 0;
}
