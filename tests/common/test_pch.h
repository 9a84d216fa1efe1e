// The headers nearly every test source includes, precompiled once for all the test executables
// (tests/CMakeLists.txt NVFP4LM_TEST_PCH): GoogleTest, nlohmann/json and fmt cost a test source ~1.5 of its ~5 s
// of compilation, ~2 minutes of CI's 2 cores over ~180 files. Only headers that change rarely belong here: an edit
// of one rebuilds every test.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "core/tensor.h"
