# Hardening: kill tests, fault injection, hostile peers (see docs/reliability.md).
# test_kill: 3 forked ranks over ofi, one SIGKILLed inside each collective (and
# one leaving main without weft_comm_destroy); survivors must fail, not hang.
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-ofi)
  weft_add_test(test_kill SOURCES test_kill.c LABELS mp TIMEOUT 240)
  add_dependencies(test_kill weft-plugin-algo-host weft-plugin-ofi)
endif()
