// Checking the one message an InputError carries: input_error_of(fn) runs fn
// and returns what it threw (a test failure when it throws none), and
// EXPECT_HAS checks that a message contains a piece, printing the whole
// message when it does not.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.hpp"

namespace pentad::test {

inline std::string input_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError, none was thrown";
  return "";
}

}  // namespace pentad::test

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)
