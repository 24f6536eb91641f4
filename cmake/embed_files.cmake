# Embeds files into a C++ translation unit at build time.
#
# flashsale_embed_files(<target> <output.cc> HEADER <header.h> NAMESPACE <ns> FUNCTION <fn>
#                       TYPE <type> [STEM] [MD5] FILES <file>...)
# generates <output.cc>, which defines `std::span<const <type>> <ns>::<fn>()` (declared in
# <header.h>) with one `<type>{name, bytes[, md5]}` per file, and adds it to <target>. The name is
# the file's name, or its stem with STEM; MD5 adds the hex MD5 of the bytes (an ETag). Editing a
# file regenerates the output; nothing reads the files at run time.
set(FLASHSALE_EMBED_FILES_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/embed_files_run.cmake")

function(flashsale_embed_files target output)
  cmake_parse_arguments(PARSE_ARGV 2 arg "STEM;MD5" "HEADER;NAMESPACE;FUNCTION;TYPE" "FILES")
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${CMAKE_COMMAND} "-DOUTPUT=${output}" "-DFILES=${arg_FILES}" "-DHEADER=${arg_HEADER}"
            "-DNAMESPACE=${arg_NAMESPACE}" "-DFUNCTION=${arg_FUNCTION}" "-DTYPE=${arg_TYPE}"
            "-DSTEM=${arg_STEM}" "-DMD5=${arg_MD5}" -P "${FLASHSALE_EMBED_FILES_SCRIPT}"
    DEPENDS ${arg_FILES} "${FLASHSALE_EMBED_FILES_SCRIPT}"
    COMMENT "Embedding files into ${output}"
    VERBATIM)
  target_sources(${target} PRIVATE "${output}")
  # A file is one raw string literal, longer than the 65,536 characters -Wpedantic warns of; the
  # compilers we build with (g++ 12, clang 14) take literals of any length.
  set_source_files_properties("${output}" PROPERTIES COMPILE_OPTIONS -Wno-overlength-strings)
endfunction()
