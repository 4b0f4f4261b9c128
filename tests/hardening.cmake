# SPDX-License-Identifier: Apache-2.0
# Hardening: kill tests, fault injection, hostile peers (see docs/reliability.md).
# test_kill: 3 forked ranks over shm, then over ofi's tcp provider, one
# SIGKILLed inside each collective (and one leaving main without
# weft_comm_destroy); survivors must fail, not hang.
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-ofi AND TARGET weft-plugin-shm)
  weft_add_test(test_kill SOURCES test_kill.c LABELS mp TIMEOUT 400
    ENV WEFT_OFI_ADDR=127.0.0.1)
  add_dependencies(test_kill weft-plugin-algo-host weft-plugin-ofi weft-plugin-shm)
endif()

# test_fault: rank 0 has its Nth alloc/register/connect/put/flush failed
# (WEFT_TEST_FAULT, core/fault.h); errors must reach the caller, nothing hangs,
# nothing leaks (the ASan job runs it with LeakSanitizer).
if(TARGET weft-plugin-ofi)
  weft_add_test(test_fault SOURCES test_fault.c LABELS mp TIMEOUT 600)
  add_dependencies(test_fault weft-plugin-ofi)
endif()

# test_hostile: after the rendezvous, oversized messages, reserved tags and
# forged memory blobs from an authenticated rank are refused.
if(TARGET weft-plugin-ofi)
  weft_add_test(test_hostile SOURCES test_hostile.c LABELS mp TIMEOUT 240)
  add_dependencies(test_hostile weft-plugin-ofi)
endif()

# test_threads: ranks as threads of one process (ports, proxy, collectives,
# two comms at once, abort from another thread): the suite the TSan job runs.
# CK_FORK=no: Check would fork each test, and TSan does not follow a fork.
if(TARGET weft-plugin-algo-host AND TARGET weft-plugin-ofi)
  weft_add_test(test_threads SOURCES test_threads.c LABELS mp TIMEOUT 300 ENV CK_FORK=no)
  add_dependencies(test_threads weft-plugin-algo-host weft-plugin-ofi)
endif()

# test_signals: with ucx, ofi and shm open, a rank catches the signals it
# caught before weft, a crash ends it by its signal, and SIGHUP ends it.
if(TARGET weft-plugin-ucx AND TARGET weft-plugin-ofi AND TARGET weft-plugin-shm AND TARGET weft-plugin-algo-host)
  weft_add_test(test_signals SOURCES test_signals.c LABELS mp TIMEOUT 240
    ENV WEFT_OFI_ADDR=127.0.0.1 WEFT_UCX_NET_DEVICES=lo)
  add_dependencies(test_signals weft-plugin-ucx weft-plugin-ofi weft-plugin-shm weft-plugin-algo-host)
endif()

# test_handles: destroyed and made-up communicator handles get -EINVAL from
# every public call; a second thread inside a busy communicator gets -EBUSY.
weft_add_test(test_handles SOURCES test_handles.c LABELS mp TIMEOUT 120 LIBS Threads::Threads)

# test_rendezvous: a stranger holding 1,000 idle connections to the root (the
# root and the ranks at RLIMIT_NOFILE 256) does not stop the job; a rank that
# reuses an id is told the rendezvous is over.
weft_add_test(test_rendezvous SOURCES test_rendezvous.c LABELS mp TIMEOUT 180)
target_include_directories(test_rendezvous PRIVATE ${PROJECT_SOURCE_DIR}/core)

# test_listeners: with ucx and ofi loaded but no peer reached through them,
# neither listens nor makes a file in /dev/shm; connections through them do
# (the controls).
if(TARGET weft-plugin-ucx AND TARGET weft-plugin-ofi AND TARGET weft-plugin-shm AND TARGET weft-plugin-algo-host)
  weft_add_test(test_listeners SOURCES test_listeners.c LABELS mp TIMEOUT 180 ENV WEFT_OFI_ADDR=127.0.0.1)
  add_dependencies(test_listeners weft-plugin-ucx weft-plugin-ofi weft-plugin-shm weft-plugin-algo-host)
endif()
