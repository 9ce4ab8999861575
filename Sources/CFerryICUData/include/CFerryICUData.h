// CFerryICUData has no API: it defines ICU's data entry point (ICUData.S, made by
// scripts/icu-data) so that linking it replaces the toolchain's full ICU data. SwiftPM wants a
// public headers folder for a C target; this is it.
