# tests/serial_tests.cmake: tests that ctest runs alone (RUN_SERIAL), included after the discovered
# tests (TEST_INCLUDE_FILES). They measure how fast ranks are against each other: a test beside
# them takes a share of the cores they pin.
set_tests_properties(StragglerTest.ARankWithAQuarterOfACoreIsNamed StragglerTest.AnEvenRunNamesNobody
                     PROPERTIES RUN_SERIAL TRUE)
