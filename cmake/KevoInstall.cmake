# KevoInstall.cmake — what `cmake --install build --prefix P` puts where:
#   P/bin/kevo, P/bin/kevo-worker      (kevo finds the worker beside itself)
#   P/include/kevo/*.h                 the candidate ABI and the host check's API,
#                                      for building candidates and exports by hand
#   P/share/kevo/{include,patterns,problems,configs,docs/abi.md}
#                                      the data root an installed kevo reads
#                                      (common/datadir.c: <bin>/../share/kevo)
include(GNUInstallDirs)
set(kevo_data ${CMAKE_INSTALL_DATADIR}/kevo)
# libraries found in a private prefix (-DCMAKE_PREFIX_PATH) stay found once
# installed: the binaries keep the run path to every non-system library folder
set_target_properties(kevo kevo-worker PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS kevo kevo-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/kevo DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/kevo DESTINATION ${kevo_data}/include)
install(DIRECTORY patterns problems configs DESTINATION ${kevo_data})
install(FILES docs/abi.md DESTINATION ${kevo_data}/docs)
