// Small formatting and statistics helpers shared by the run log, the planner
// and the report.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace pentad {

// 1536 -> "1.5 KiB" (digits after the point; bytes below 1 KiB print with
// none when whole_bytes is set).
inline std::string format_bytes(double b, int digits, bool whole_bytes = false) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(b) >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f %s", u == 0 && whole_bytes ? 0 : digits, b, units[u]);
  return buf;
}

// The upper median (v[n/2] after sorting); NaN for no values.
inline double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace pentad
