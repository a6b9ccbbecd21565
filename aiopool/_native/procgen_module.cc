// `aiopool._native._procgen`: Procgen's 16 games, stepped through procgen 0.10.7's own library
// (envs/procgen/procgen.h), which aiopool.procgen fetches from PyPI and loads at run time.
//
// Ids: EnvPool's, one per game and distribution mode (`CoinrunEasy-v0`, `StarpilotExtreme-v0`,
// ...), and procgen's gym ids (`procgen-coinrun-v0`), whose distribution_mode is a kwarg with
// procgen's default, "hard".
#include <cctype>
#include <string>

#include "envs/procgen/procgen.h"
#include "module.h"

namespace {

void add(const std::string& id, const std::string& game, const std::string& mode) {
  aiopool::EnvEntry e = aiopool::entry_for<aiopool::procgen::Procgen>(id.c_str(), 0);
  e.config_keys = [game, mode] {
    std::vector<aiopool::ConfigKey> keys = aiopool::procgen::Procgen::config_keys();
    for (aiopool::ConfigKey& k : keys) {
      if (k.name == "env_name") k.default_string = game;
      if (k.name == "distribution_mode") k.default_string = mode;
    }
    return keys;
  };
  aiopool::Registry::get().add(std::move(e));
}

std::string title(std::string word) {
  word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
  return word;
}

const bool kRegistered = [] {
  for (const aiopool::procgen::Game& g : aiopool::procgen::kGames) {
    for (const aiopool::procgen::Mode& m : aiopool::procgen::kModes)
      if (aiopool::procgen::has_mode(g, m.name)) add(title(g.name) + title(m.name) + "-v0", g.name, m.name);
    add(std::string("procgen-") + g.name + "-v0", g.name, "hard");
  }
  return true;
}();

}  // namespace

NB_MODULE(_procgen, m) {
  aiopool::define_pool_module(m,
                              "aiopool's Procgen envs: procgen 0.10.7's games, its own library loaded at run "
                              "time.");
}
