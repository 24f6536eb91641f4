# Embeds Lua script files into a C++ translation unit at build time.
#
# flashsale_embed_lua(<target> <output.cc> <file.lua>...) generates <output.cc>, which defines
# flashsale::keyspace::EmbeddedScripts() (declared in src/keyspace/embedded_scripts.h) with each file's
# stem as its name and its bytes as its source, and adds it to <target>. Editing a script
# regenerates the file; nothing reads the .lua files at run time. Each script's header (KEYS, ARGV,
# RETURNS) is parsed from the embedded source by redis::ScriptSet (src/redis/scripts.h) at startup.
include("${CMAKE_CURRENT_LIST_DIR}/embed_files.cmake")

function(flashsale_embed_lua target output)
  flashsale_embed_files(${target} "${output}" HEADER keyspace/embedded_scripts.h
    NAMESPACE flashsale::keyspace FUNCTION EmbeddedScripts TYPE EmbeddedScript STEM FILES ${ARGN})
endfunction()
