// `aiopool._native._atari`: the Atari 2600 games, ALE built from the ale-py sdist (see
// cmake/atari.cmake). This module links ALE, which is GPL-2.0-only, so the module as built is
// GPL-2.0-only; it is kept apart from the Apache-2.0 modules for that reason.
//
// One id per ROM that ale-py 0.12.1 ships, named as gymnasium's `ALE/<Name>-v5` (ale-py's
// rom_id_to_name: snake_case title-cased); the four ROMs without a single-player mode (combat,
// joust, maze_craze, warlords) are left out, as ale-py's registration leaves them out. Each id
// is the Atari env with its ROM as the default `rom_path`, which Python resolves to the file in
// the installed ale-py wheel (aiopool/registry.py).
#include <string>
#include <utility>

#include "envs/atari/atari.h"
#include "module.h"

namespace {

// (id name, ale-py ROM id)
constexpr std::pair<const char*, const char*> kGames[] = {
    {"Adventure", "adventure"},
    {"AirRaid", "air_raid"},
    {"Alien", "alien"},
    {"Amidar", "amidar"},
    {"Assault", "assault"},
    {"Asterix", "asterix"},
    {"Asteroids", "asteroids"},
    {"Atlantis", "atlantis"},
    {"Atlantis2", "atlantis2"},
    {"Backgammon", "backgammon"},
    {"BankHeist", "bank_heist"},
    {"BasicMath", "basic_math"},
    {"BattleZone", "battle_zone"},
    {"BeamRider", "beam_rider"},
    {"Berzerk", "berzerk"},
    {"Blackjack", "blackjack"},
    {"Bowling", "bowling"},
    {"Boxing", "boxing"},
    {"Breakout", "breakout"},
    {"Carnival", "carnival"},
    {"Casino", "casino"},
    {"Centipede", "centipede"},
    {"ChopperCommand", "chopper_command"},
    {"CrazyClimber", "crazy_climber"},
    {"Crossbow", "crossbow"},
    {"Darkchambers", "darkchambers"},
    {"Defender", "defender"},
    {"DemonAttack", "demon_attack"},
    {"DonkeyKong", "donkey_kong"},
    {"DoubleDunk", "double_dunk"},
    {"Earthworld", "earthworld"},
    {"ElevatorAction", "elevator_action"},
    {"Enduro", "enduro"},
    {"Entombed", "entombed"},
    {"Et", "et"},
    {"FishingDerby", "fishing_derby"},
    {"FlagCapture", "flag_capture"},
    {"Freeway", "freeway"},
    {"Frogger", "frogger"},
    {"Frostbite", "frostbite"},
    {"Galaxian", "galaxian"},
    {"Gopher", "gopher"},
    {"Gravitar", "gravitar"},
    {"Hangman", "hangman"},
    {"HauntedHouse", "haunted_house"},
    {"Hero", "hero"},
    {"HumanCannonball", "human_cannonball"},
    {"IceHockey", "ice_hockey"},
    {"Jamesbond", "jamesbond"},
    {"JourneyEscape", "journey_escape"},
    {"Kaboom", "kaboom"},
    {"Kangaroo", "kangaroo"},
    {"KeystoneKapers", "keystone_kapers"},
    {"KingKong", "king_kong"},
    {"Klax", "klax"},
    {"Koolaid", "koolaid"},
    {"Krull", "krull"},
    {"KungFuMaster", "kung_fu_master"},
    {"LaserGates", "laser_gates"},
    {"LostLuggage", "lost_luggage"},
    {"MarioBros", "mario_bros"},
    {"MiniatureGolf", "miniature_golf"},
    {"MontezumaRevenge", "montezuma_revenge"},
    {"MrDo", "mr_do"},
    {"MsPacman", "ms_pacman"},
    {"NameThisGame", "name_this_game"},
    {"Othello", "othello"},
    {"Pacman", "pacman"},
    {"Phoenix", "phoenix"},
    {"Pitfall", "pitfall"},
    {"Pitfall2", "pitfall2"},
    {"Pong", "pong"},
    {"Pooyan", "pooyan"},
    {"PrivateEye", "private_eye"},
    {"Qbert", "qbert"},
    {"Riverraid", "riverraid"},
    {"RoadRunner", "road_runner"},
    {"Robotank", "robotank"},
    {"Seaquest", "seaquest"},
    {"SirLancelot", "sir_lancelot"},
    {"Skiing", "skiing"},
    {"Solaris", "solaris"},
    {"SpaceInvaders", "space_invaders"},
    {"SpaceWar", "space_war"},
    {"StarGunner", "star_gunner"},
    {"Superman", "superman"},
    {"Surround", "surround"},
    {"Tennis", "tennis"},
    {"Tetris", "tetris"},
    {"TicTacToe3D", "tic_tac_toe_3d"},
    {"TimePilot", "time_pilot"},
    {"Trondead", "trondead"},
    {"Turmoil", "turmoil"},
    {"Tutankham", "tutankham"},
    {"UpNDown", "up_n_down"},
    {"Venture", "venture"},
    {"VideoCheckers", "video_checkers"},
    {"VideoChess", "video_chess"},
    {"VideoCube", "video_cube"},
    {"VideoPinball", "video_pinball"},
    {"WizardOfWor", "wizard_of_wor"},
    {"WordZapper", "word_zapper"},
    {"YarsRevenge", "yars_revenge"},
    {"Zaxxon", "zaxxon"},
};

// The ids register when the module is imported, before any Python code can list them.
const bool kRegistered = [] {
  ale::Logger::setMode(ale::Logger::Error);  // no banner and ROM info on stdout
  for (const auto& [name, rom] : kGames) {
    aiopool::EnvEntry e = aiopool::entry_for<aiopool::atari::Atari>((std::string(name) + "-v5").c_str(), 0);
    e.config_keys = [rom = std::string(rom)] {
      std::vector<aiopool::ConfigKey> keys = aiopool::atari::Atari::config_keys();
      for (aiopool::ConfigKey& k : keys)
        if (k.name == "rom_path") k.default_string = rom + ".bin";
      return keys;
    };
    aiopool::Registry::get().add(std::move(e));
  }
  return true;
}();

}  // namespace

NB_MODULE(_atari, m) {
  aiopool::define_pool_module(
      m, "aiopool's Atari envs (ALE, GPL-2.0-only): the engine with ale-py's preprocessing.");
}
