// Boost.Asio and Boost.Beast, compiled once for the whole library. Both are header-only; CMakeLists.txt defines
// BOOST_ASIO_SEPARATE_COMPILATION and BOOST_BEAST_SEPARATE_COMPILATION for every file that includes them, so their
// non-template code is built here only instead of in each of those files (the HTTP server, connection and client).
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
