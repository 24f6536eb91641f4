# Embeds Lua script files into a C++ translation unit at build time.
#
# flashsale_embed_lua(<target> <output.cc> <file.lua>...) generates <output.cc>, which defines
# flashsale::redis::EmbeddedScripts() (declared in src/redis/embedded_scripts.h) with each file's
# stem as its name and its bytes as its source, and adds it to <target>. Editing a script
# regenerates the file; nothing reads the .lua files at run time.
set(FLASHSALE_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/embed_lua_run.cmake")

function(flashsale_embed_lua target output)
  set(files ${ARGN})
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${CMAKE_COMMAND} "-DOUTPUT=${output}" "-DFILES=${files}" -P "${FLASHSALE_EMBED_SCRIPT}"
    DEPENDS ${files} "${FLASHSALE_EMBED_SCRIPT}"
    COMMENT "Embedding Lua scripts into ${output}"
    VERBATIM)
  target_sources(${target} PRIVATE "${output}")
endfunction()
