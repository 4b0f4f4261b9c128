# SPDX-License-Identifier: Apache-2.0
# include/weft/kit.h, the plugin author's support kit: test_kit covers its
# reductions, conversions, codecs, parameter binding and error names.
weft_add_test(test_kit SOURCES test_kit.c LABELS unit TIMEOUT 120 LIBS m)
