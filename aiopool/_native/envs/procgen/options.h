// Procgen's games, their distribution modes and the options of one env, checked before the
// library sees them: procgen's library ends the process (exit) on an option it refuses, so
// every check it makes is made here first, as a std::invalid_argument that make() reports.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>

#include "../../env.h"

namespace aiopool::procgen {

inline constexpr int kInt32Max = std::numeric_limits<int32_t>::max();

// procgen's DISTRIBUTION_MODE_DICT; exploration is hard mode on one fixed level.
struct Mode {
  const char* name;
  int code;
};
inline constexpr Mode kModes[] = {
    {"easy", 0}, {"hard", 1}, {"extreme", 2}, {"memory", 10}, {"exploration", 20}};

struct Game {
  const char* name;
  bool extreme;
  bool memory;
  int exploration_seed;  // procgen's EXPLORATION_LEVEL_SEEDS; 0: no exploration mode
};

// procgen's ENV_NAMES, with the modes game.cpp's parse_options allows for each.
inline constexpr Game kGames[] = {
    {"bigfish", false, false, 0},
    {"bossfight", false, false, 0},
    {"caveflyer", false, true, 1259048185},
    {"chaser", true, false, 0},
    {"climber", false, false, 1561126160},
    {"coinrun", false, false, 1949448038},
    {"dodgeball", true, true, 0},
    {"fruitbot", false, false, 0},
    {"heist", false, true, 876640971},
    {"jumper", false, true, 1434825276},
    {"leaper", true, false, 1318677581},
    {"maze", false, true, 158988835},
    {"miner", false, true, 0},
    {"ninja", false, false, 1123500215},
    {"plunder", false, false, 0},
    {"starpilot", true, false, 0},
};

inline bool has_mode(const Game& g, const std::string& mode) {
  return mode == "easy" || mode == "hard" || (mode == "extreme" && g.extreme) ||
         (mode == "memory" && g.memory) || (mode == "exploration" && g.exploration_seed != 0);
}

// The options of one env, checked: procgen's library ends the process on a bad option.
struct Options {
  std::string game;
  int mode = 0;  // procgen's distribution_mode code
  int num_levels = 0;
  int start_level = 0;
  bool use_sequential_levels, center_agent, use_backgrounds, restrict_themes, use_monochrome_assets,
      paint_vel_info, use_generated_assets, render_human;
  std::string library, resource_root;

  explicit Options(const Config& c)
      : game(c.get_string("env_name")),
        use_sequential_levels(c.get_bool("use_sequential_levels")),
        center_agent(c.get_bool("center_agent")),
        use_backgrounds(c.get_bool("use_backgrounds")),
        restrict_themes(c.get_bool("restrict_themes")),
        use_monochrome_assets(c.get_bool("use_monochrome_assets")),
        paint_vel_info(c.get_bool("paint_vel_info")),
        use_generated_assets(c.get_bool("use_generated_assets")),
        render_human(c.get_bool("render_human")),
        library(c.get_string("library")),
        resource_root(c.get_string("resource_root")) {
    const Game* g =
        std::find_if(std::begin(kGames), std::end(kGames), [&](const Game& x) { return game == x.name; });
    if (g == std::end(kGames))
      throw std::invalid_argument("env_name is '" + game + "', not one of procgen's games");
    const std::string mode_name = c.get_string("distribution_mode");
    if (!has_mode(*g, mode_name)) {
      std::string modes;
      for (const Mode& m : kModes)
        if (has_mode(*g, m.name)) modes += std::string(modes.empty() ? "" : ", ") + m.name;
      throw std::invalid_argument("distribution_mode is '" + mode_name + "'; " + game + " has " + modes);
    }
    mode = std::find_if(std::begin(kModes), std::end(kModes), [&](const Mode& m) {
             return mode_name == m.name;
           })->code;
    const double levels = c.get("num_levels"), start = c.get("start_level");
    if (levels < 0 || levels > kInt32Max) throw std::invalid_argument(range("num_levels", levels));
    if (start < 0 || start > kInt32Max) throw std::invalid_argument(range("start_level", start));
    if (start + levels > kInt32Max)
      throw std::invalid_argument("start_level + num_levels is " +
                                  std::to_string(static_cast<int64_t>(start + levels)) +
                                  ", expected at most 2**31 - 1 (procgen's level seeds are C ints)");
    num_levels = static_cast<int>(levels);
    start_level = static_cast<int>(start);
    if (mode_name == "exploration") {
      if (num_levels != 0 || start_level != 0)
        throw std::invalid_argument("distribution_mode 'exploration' sets num_levels=1 and start_level=" +
                                    std::to_string(g->exploration_seed) + " (" + game +
                                    "'s exploration level), as procgen does; leave both out");
      mode = 1;
      num_levels = 1;
      start_level = g->exploration_seed;
    }
  }

  static std::string range(const char* key, double v) {
    return std::string(key) + " is " + std::to_string(static_cast<int64_t>(v)) + ", expected 0 to 2**31 - 1";
  }
};

}  // namespace aiopool::procgen
