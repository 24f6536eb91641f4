# Installation and the Debian package (CPack DEB): `scripts/package.sh` builds
# flashsale_<version>_amd64.deb with the binary, the systemd unit, /etc/flashsale/flashsale.toml
# (every setting commented at its default, generated from src/app/config.cc), the man page, the
# system user (sysusers.d, created by postinst) and /usr/share/doc/flashsale/copyright (Debian's
# machine-readable format: Apache-2.0, whose text Debian keeps in /usr/share/common-licenses).
include(GNUInstallDirs)

set(FLASHSALE_DEBIAN_DIR "${PROJECT_SOURCE_DIR}/deploy/debian")
install(TARGETS flashsale RUNTIME DESTINATION bin)
install(FILES "${FLASHSALE_DEBIAN_DIR}/flashsale.service" DESTINATION lib/systemd/system)
install(FILES "${FLASHSALE_DEBIAN_DIR}/flashsale.sysusers" DESTINATION lib/sysusers.d
        RENAME flashsale.conf)
install(FILES "${CMAKE_BINARY_DIR}/src/flashsale.toml" DESTINATION /etc/flashsale)

# The man page, compressed as Debian wants it.
add_custom_command(
  OUTPUT "${CMAKE_BINARY_DIR}/flashsale.1.gz"
  COMMAND gzip -9 -n -c "${FLASHSALE_DEBIAN_DIR}/flashsale.1" > "${CMAKE_BINARY_DIR}/flashsale.1.gz"
  DEPENDS "${FLASHSALE_DEBIAN_DIR}/flashsale.1"
  COMMENT "Compressing the man page"
  VERBATIM)
add_custom_target(flashsale_man ALL DEPENDS "${CMAKE_BINARY_DIR}/flashsale.1.gz")
install(FILES "${CMAKE_BINARY_DIR}/flashsale.1.gz" DESTINATION share/man/man1)
install(FILES README.md DESTINATION share/doc/flashsale)
install(FILES "${FLASHSALE_DEBIAN_DIR}/copyright" DESTINATION share/doc/flashsale)
install(DIRECTORY deploy/prometheus deploy/grafana DESTINATION share/doc/flashsale/examples)
install(FILES api/openapi.json DESTINATION share/doc/flashsale)

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "flashsale")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "flashsale maintainers <flashsale@localhost>")
# SPDX-License-Identifier: Apache-2.0 (LICENSE; in the package, /usr/share/doc/flashsale/copyright)
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "flash sales and lotteries that never oversell, lose or double an order")
set(CPACK_PACKAGE_DESCRIPTION
    "A C++ service that sells or draws scarce stock under extreme contention on Redis, with a relational record written exactly once. Runs under systemd with an embedded Redis and SQLite by default.")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")  # flashsale_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The embedded default runs redis-server; adduser is the postinst's fallback without sysusers.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "redis-server (>= 5:7.0), adduser")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${FLASHSALE_DEBIAN_DIR}/postinst;${FLASHSALE_DEBIAN_DIR}/prerm;${FLASHSALE_DEBIAN_DIR}/postrm;${FLASHSALE_DEBIAN_DIR}/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_STRIP_FILES TRUE)
include(CPack)
