# Trellara - one entry point: build, test, install, bench, quickstart.
#
#   make                 build every program into bin/
#   make check           unit tests, unit tests under ASan+UBSan, bats tests,
#                        and the cross-version lane (bats-cross)
#   make unit            unit tests only (plain and sanitized)
#   make bats            bats tests only (BATS_FILTER=regex, BATS_FILES=...)
#   make bats-cross      tests/bats/matrix/flow.bats on source PostgreSQL 15 -> target 18
#   make check-matrix    the end-to-end bats tests in lanes: 16->16, 17->17, 18->18,
#                        15->18, 16->17 (scripts/run-matrix.sh; installs 16-18 first)
#   make shellcheck      shellcheck over scripts/, bench/ and tests/bats/
#   make install PREFIX=/usr/local DESTDIR=
#   make bench           benchmarks (prints ratios against same-run baselines)
#   make soak HOURS=N    the whole flow for N hours (default 0.1; 24 is the release
#                        gate) under load, large transactions and kills; trends and
#                        invariants into target/soak/ (scripts/soak.sh)
#   make deps            install missing Debian packages (root) and PostgreSQL 18
#                        for bats-cross (scripts/install-deps.sh --pg-majors 18)
#   make sim             the failure simulator, build/sim/trellara-sim (no libpq)
#   make sim-check       run it: every named scenario and SIM_SCHEDULES schedules
#   make sim-long SCHEDULES=N   as many schedules as asked, with progress lines
#   make correctness-report     sim-check, then docs/correctness-report.html from its run file
#   make verify-correctness-report   fail when that report is older than the source

CC ?= gcc
# V=1 prints every command
Q := $(if $(V),,@)
PREFIX ?= /usr/local
DESTDIR ?=
PG_INCLUDE := $(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -g $(WARN) -Iinclude -Isim -I$(PG_INCLUDE) \
	-include include/trellara/banned.h
DEPFLAGS := -MMD -MP
CFLAGS ?= -O2
ALL_CFLAGS := $(BASE_CFLAGS) $(CFLAGS)
SAN_FLAGS := -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDLIBS := -lpq -lyaml -lz -lpthread
# The NATS C client (libnats-dev): only the programs that speak to a
# JetStream stream link it (LDLIBS_<program>), and only their files that
# use it include it (NATS_SRC).
NATS_CFLAGS := $(shell pkg-config --cflags libnats 2>/dev/null)
NATS_LIBS := $(shell pkg-config --libs libnats 2>/dev/null || echo -lnats)
# cmd/jetstream/ is the connection code the programs on libnats link
# (not a program of its own).
LDLIBS_trellara-stream := $(NATS_LIBS)
LDLIBS_trellara-capture := $(NATS_LIBS)
LDLIBS_trellara-applyd := $(NATS_LIBS)
NATS_SRC := cmd/jetstream/jetstream_session.c cmd/trellara-stream/stream_jetstream.c \
	cmd/trellara-capture/capture_jetstream.c cmd/trellara-applyd/applyd_jetstream.c

# The sub-libraries (DESIGN §2), in the order data flows and the order they
# link (each may use only those after it):
#   pg      libpq: connections, the checkpoint schema, snapshot runs
#   apply   applyd's decisions, planner, engine (no libpq)
#   cdc     pgoutput decoder, assembler, envelope, capture's core and policy (no libpq)
#   stream  the durable stream and its file systems (no libpq)
#   base    config, log, LSNs, checksums, fault points, files
SUBLIBS := pg apply cdc stream base
COMMON_SRC := $(sort $(wildcard common/*/*.c))
COMMON_OBJ := $(COMMON_SRC:%.c=build/obj/%.o)
COMMON_SAN_OBJ := $(COMMON_SRC:%.c=build/san/%.o)
SUBLIB_A := $(SUBLIBS:%=build/lib/libtrellara-%.a)
SUBLIB_SAN_A := $(SUBLIBS:%=build/lib/libtrellara-%-san.a)
# the libraries that link without libpq or libyaml (the stream's frame
# codec needs zlib: NOLIBPQ_LDLIBS)
NOLIBPQ_A := $(filter-out build/lib/libtrellara-pg.a,$(SUBLIB_A))
NOLIBPQ_LDLIBS := -lz

PROGRAMS := $(notdir $(wildcard cmd/trellara-*))
PROGRAM_BINS := $(PROGRAMS:%=bin/%)
# Every cmd/ module except main.c (and those on libnats, or calling into
# them: capture's loop opens its JetStream sink, applyd's its source) is
# linkable into unit tests and the simulator.
NATS_CALLERS := cmd/trellara-capture/capture.c cmd/trellara-capture/capture_connect.c cmd/trellara-applyd/applyd.c
CMD_LIB_SRC := $(sort $(filter-out %/main.c $(NATS_SRC) $(NATS_CALLERS),$(wildcard cmd/*/*.c)))
CMD_LIB_OBJ := $(CMD_LIB_SRC:%.c=build/obj/%.o)
CMD_LIB_SAN_OBJ := $(CMD_LIB_SRC:%.c=build/san/%.o)

# The simulator's modules (sim/, no libpq): every file but main.c, linked
# into the unit tests (and the simulator program).
# The simulation itself (models, world, scenarios' presets), linked into
# the unit tests too; the command line, run file and report are only the
# binary's.
SIM_LIB_SRC := $(addprefix sim/,model_broker.c model_broker_client.c model_cutover.c model_source.c model_target.c presets.c sim_db.c sim_rng.c tamper.c world.c)
SIM_LIB_OBJ := $(SIM_LIB_SRC:%.c=build/obj/%.o)
SIM_LIB_SAN_OBJ := $(SIM_LIB_SRC:%.c=build/san/%.o)

UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRC:tests/unit/%.c=build/tests/%)
UNIT_SAN_BINS := $(UNIT_SRC:tests/unit/%.c=build/san-tests/%)

BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BINS := $(BENCH_SRC:bench/%.c=build/bench/%)

SCRIPTS := $(filter-out scripts/trellara-lib.sh,$(wildcard scripts/trellara scripts/trellara-*))

# The failure simulator (sim/; trellara-chaos(1)).  It links the no-libpq
# sub-libraries only, like the decision cores' tests.
SIM_SRC := $(sort $(wildcard sim/*.c))
SIM_OBJ := $(SIM_SRC:%.c=build/obj/%.o)
SIM_BIN := build/sim/trellara-sim
SIM_SEED ?= 1
SIM_SCHEDULES ?= 2000
# The broken variants' runs: each must be caught within these schedules.
# Every variant is caught within its first 63 (seed 1, this version), so
# 500 keep an eightfold margin and spare make check about 45 s of the
# 2000 schedules the variants ran before.
SIM_VARIANT_SCHEDULES ?= 500
SCHEDULES ?= 100000
SIM_RUN := build/sim/run.json
CORRECTNESS_REPORT ?= docs/correctness-report.html
MAN1 := $(wildcard man/man1/*.1)
MAN5 := $(wildcard man/man5/*.5)
MAN7 := $(wildcard man/man7/*.7)

# object files are never intermediate: keep them
.SECONDARY:

.PHONY: all check unit unit-plain unit-san bats conformance bats-cross check-matrix fuzz-short install bench deps clean quickstart
.PHONY: sim sim-check sim-long sim-variants sim-variants-check correctness-report verify-correctness-report FORCE

all: $(PROGRAM_BINS) $(SIM_BIN)

define SUBLIB_RULE
build/lib/libtrellara-$(1).a: $(patsubst %.c,build/obj/%.o,$(sort $(wildcard common/$(1)/*.c)))
	@mkdir -p $$(@D)
	$$(Q)rm -f $$@ && $$(AR) rcs $$@ $$^
build/lib/libtrellara-$(1)-san.a: $(patsubst %.c,build/san/%.o,$(sort $(wildcard common/$(1)/*.c)))
	@mkdir -p $$(@D)
	$$(Q)rm -f $$@ && $$(AR) rcs $$@ $$^
endef
$(foreach l,$(SUBLIBS),$(eval $(call SUBLIB_RULE,$(l))))

build/obj/%.o: %.c
	@mkdir -p $(@D)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

build/san/%.o: %.c
	@mkdir -p $(@D)
	$(if $(Q),@echo "  CC-SAN  $<")
	$(Q)$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) $(DEPFLAGS) -c $< -o $@

# A program: its own folder's objects plus libtrellara (and another
# program's module it runs: cutover runs verify's own verify_run).
EXTRA_OBJ_trellara-cutover := build/obj/cmd/trellara-verify/verify.o build/obj/cmd/trellara-verify/verify_compare.o
EXTRA_OBJ_trellara-repair-plan := build/obj/cmd/trellara-verify/verify.o build/obj/cmd/trellara-verify/verify_compare.o
EXTRA_OBJ_trellara-stream := build/obj/cmd/jetstream/jetstream_session.o
EXTRA_OBJ_trellara-capture := build/obj/cmd/jetstream/jetstream_session.o
EXTRA_OBJ_trellara-applyd := build/obj/cmd/jetstream/jetstream_session.o
# the schema contract (dataset.contract: pinned) that capture and applyd
# check: contract-test's module and its catalog reader (the pin's JSON
# parser is common/base/jsonread.c)
CONTRACT_OBJ := build/obj/cmd/trellara-contract-test/contract.o build/obj/cmd/trellara-contract-test/contract_pg.o
EXTRA_OBJ_trellara-capture += $(CONTRACT_OBJ)
EXTRA_OBJ_trellara-applyd += $(CONTRACT_OBJ)
define PROGRAM_RULE
bin/$(1): $(patsubst %.c,build/obj/%.o,$(wildcard cmd/$(1)/*.c)) $(EXTRA_OBJ_$(1)) $(SUBLIB_A)
	@mkdir -p bin
	$$(if $$(Q),@echo "  LINK    $$@")
	$$(Q)$$(CC) $$(ALL_CFLAGS) -o $$@ $$^ $$(LDLIBS) $$(LDLIBS_$(1))
endef
$(foreach p,$(PROGRAMS),$(eval $(call PROGRAM_RULE,$(p))))
$(NATS_SRC:%.c=build/obj/%.o): ALL_CFLAGS += $(NATS_CFLAGS)

build/tests/%: build/obj/tests/unit/%.o $(CMD_LIB_OBJ) $(SIM_LIB_OBJ) $(SUBLIB_A)
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# The decision cores and the stream link without libpq (DESIGN §2): these
# links take only the no-libpq sub-libraries and no -lpq/-lyaml (zlib only,
# for compressed frames), so a call into libpq (or into anything that needs
# it) fails the build.
NOLIBPQ_TESTS := ack_policy slot_policy jetstream_policy seqstate cutplan apply_core apply_deps apply_fold apply_chunks apply_fence capture_core planner_set stream_sim sim_db model_broker model_source jsonread sim_world tabledef
NOLIBPQ_BINS := $(NOLIBPQ_TESTS:%=build/tests/%_nolibpq)
build/tests/%_nolibpq: build/obj/tests/unit/test_%.o $(SIM_LIB_OBJ) $(NOLIBPQ_A)
	@mkdir -p $(@D)
	$(if $(Q),@echo "  LINK    $@ (no libpq: $(NOLIBPQ_A:build/lib/lib%.a=%))")
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(NOLIBPQ_LDLIBS)

# --create-tables' DDL generator: its test links tabledef.o and the
# no-libpq libraries only (the catalog reader is snapshot_tables.c).
build/tests/test_tabledef build/tests/tabledef_nolibpq: build/obj/tests/unit/test_tabledef.o build/obj/cmd/trellara-snapshot/tabledef.o $(NOLIBPQ_A)
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(NOLIBPQ_LDLIBS)
build/san-tests/test_tabledef: build/san/tests/unit/test_tabledef.o build/san/cmd/trellara-snapshot/tabledef.o $(filter-out build/lib/libtrellara-pg-san.a,$(SUBLIB_SAN_A))
	@mkdir -p $(@D)
	$(Q)$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) -o $@ $^ $(NOLIBPQ_LDLIBS)

build/san-tests/%: build/san/tests/unit/%.o $(CMD_LIB_SAN_OBJ) $(SIM_LIB_SAN_OBJ) $(SUBLIB_SAN_A)
	@mkdir -p $(@D)
	$(Q)$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) -o $@ $^ $(LDLIBS)

build/bench/%: build/obj/bench/%.o $(SUBLIB_A)
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

unit: unit-plain unit-san

unit-plain: $(UNIT_BINS) $(NOLIBPQ_BINS)
	@set -e; for t in $(UNIT_BINS) $(NOLIBPQ_BINS); do echo "== $$t"; $$t; done

# Each sanitizer run is a target of its own, so that make -j shares them
# out between the cores beside unit-plain (under the sanitizers they take
# about five times as long); the longest start first.
UNIT_SAN_SLOW := test_stream_sim test_model_source test_assembler test_sim_world test_stream_compress
UNIT_SAN_ORDER := $(filter $(UNIT_SAN_SLOW:%=build/san-tests/%),$(UNIT_SAN_BINS)) \
	$(filter-out $(UNIT_SAN_SLOW:%=build/san-tests/%),$(UNIT_SAN_BINS))
UNIT_SAN_RUNS := $(UNIT_SAN_ORDER:%=run-%)
.PHONY: $(UNIT_SAN_RUNS)
unit-san: $(UNIT_SAN_RUNS)
$(UNIT_SAN_RUNS): run-%: %
	@echo "== $< (asan+ubsan)"; \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 $<

# Test programs the bats tests run (not unit tests: they need a server)
BATS_TOOLS := build/tests/plan_set_emit build/tests/jetstream_publish

# puts a JetStream stream in the state tests/bats/66-jetstream.bats needs,
# and decodes what capture published (67-jetstream-capture.bats)
build/tests/jetstream_publish: tests/unit/jetstream_publish.c $(NOLIBPQ_A)
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) $(NATS_CFLAGS) -o $@ $^ $(NATS_LIBS) $(NOLIBPQ_LDLIBS)

bats: all $(BATS_TOOLS)
	@scripts/run-bats.sh

# PostgreSQL's own logical-replication scenarios (src/test/subscription/t/)
# through a flow: tests/conformance/, docs/CONFORMANCE.md
CONFORMANCE_FILES := $(sort $(wildcard tests/conformance/*.bats))
conformance: all $(BATS_TOOLS)
	@BATS_FILES="$(CONFORMANCE_FILES)" scripts/run-bats.sh

# The PostgreSQL majors make check needs besides Debian's 15 (for bats-cross).
CHECK_PG_MAJORS := 18

# One cross-version lane, small enough for make check: the whole flow,
# --create-tables from the catalogs, hostile session defaults and planted
# objects, on source 15 -> target 18.
bats-cross: all $(BATS_TOOLS)
	@TRELLARA_MATRIX_LANES=15:18 TRELLARA_MATRIX_FILES="tests/bats/matrix/flow.bats tests/bats/42-snapshot-create-tables.bats tests/bats/38-session-settings.bats tests/bats/39-planted-objects.bats" scripts/run-matrix.sh

# Every lane (TRELLARA_MATRIX_LANES="SRC:TGT ..." to choose): heavy, not
# part of make check.
check-matrix: all $(BATS_TOOLS)
	@scripts/run-matrix.sh

# Both cores: the builds, the plain and the sanitizer unit runs side by
# side, and one bats file more than there are cores at a time
# (scripts/run-bats.sh BATS_JOBS): a bats file waits at times (servers
# starting, a flow catching up), and one file more fills those waits.
# The time of make check's own processes (user + sys over wall time,
# about 62% of 2 cores) leaves out the servers, which detach from it:
# /proc/stat had the cores 95% busy through a bats run of four files at
# a time, which was slower (1197 s) than three at a time (1085 s).
CHECK_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CHECK_BATS_JOBS ?= $(shell echo $$(($(CHECK_JOBS) + 1)))
check: deps
	$(MAKE) -j$(CHECK_JOBS) all $(BATS_TOOLS)
	$(MAKE) -j$(CHECK_JOBS) --output-sync=target shellcheck
	$(MAKE) -j$(CHECK_JOBS) --output-sync=target unit
	$(MAKE) sim-check
	$(MAKE) -j$(CHECK_JOBS) sim-variants-check
	$(MAKE) verify-correctness-report
	$(MAKE) fuzz-short
	BATS_JOBS=$(CHECK_BATS_JOBS) $(MAKE) bats
	BATS_JOBS=$(CHECK_BATS_JOBS) $(MAKE) conformance
	BATS_JOBS=$(CHECK_JOBS) $(MAKE) bats-cross

# ---- exit codes for the scripts and the systemd units, from defaults.h ----
# bin/trellara-exit-codes.sh is sourced by the scripts (through
# scripts/trellara-lib.sh); build/systemd/*.service are the units with
# RestartPreventExitStatus= filled in (tests/bats/08-exit-codes.bats
# checks that they agree).
GEN_EXIT_CODES := build/gen/gen-exit-codes
SYSTEMD_UNITS := $(patsubst configs/systemd/%.in,build/systemd/%,$(wildcard configs/systemd/*.service.in))
all: bin/trellara-exit-codes.sh $(SYSTEMD_UNITS)
$(GEN_EXIT_CODES): scripts/gen-exit-codes.c include/trellara/defaults.h
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $<
bin/trellara-exit-codes.sh: $(GEN_EXIT_CODES)
	@mkdir -p $(@D)
	$(Q)$(GEN_EXIT_CODES) shell >$@.tmp && chmod 0644 $@.tmp && mv -f $@.tmp $@
build/systemd/%: configs/systemd/%.in $(GEN_EXIT_CODES)
	@mkdir -p $(@D)
	$(Q)list=$$($(GEN_EXIT_CODES) systemd) && sed "s/@FAIL_CLOSED_EXITS@/$$list/" $< >$@.tmp && mv -f $@.tmp $@
# ---- end exit codes ----

# ---- shellcheck (tests/bats/.shellcheckrc says which checks the tests
# leave out, and why) ----
SHELL_SCRIPTS := $(shell grep -lE '^\#!.*\b(ba)?sh\b' scripts/* 2>/dev/null)
BATS_SHELL := $(wildcard tests/bats/*.bats tests/bats/matrix/*.bats tests/bats/helpers/*.bash \
	tests/conformance/*.bats tests/conformance/helpers/*.bash)
BENCH_SHELL := $(wildcard bench/*.sh)
# two parts, which make -j runs side by side
.PHONY: shellcheck shellcheck-scripts shellcheck-tests
shellcheck: shellcheck-scripts shellcheck-tests
shellcheck-scripts:
	shellcheck -x $(SHELL_SCRIPTS) $(BENCH_SHELL)
shellcheck-tests:
	shellcheck -x -s bash $(BATS_SHELL)
# ---- end shellcheck ----

# A short run of every fuzz target (longer ones by hand: tests/fuzz/run.sh 600).
fuzz-short:
	@tests/fuzz/run.sh $${FUZZ_SECONDS:-15} all

deps:
	@scripts/install-deps.sh --pg-majors "$(CHECK_PG_MAJORS)"

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 0755 $(PROGRAM_BINS) $(SIM_BIN) $(SCRIPTS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 scripts/trellara-lib.sh bin/trellara-exit-codes.sh $(DESTDIR)$(PREFIX)/bin/
	$(if $(MAN1),install -m 0644 $(MAN1) $(DESTDIR)$(PREFIX)/share/man/man1/)
	$(if $(MAN5),install -m 0644 $(MAN5) $(DESTDIR)$(PREFIX)/share/man/man5/)
	$(if $(MAN7),install -d $(DESTDIR)$(PREFIX)/share/man/man7 && install -m 0644 $(MAN7) $(DESTDIR)$(PREFIX)/share/man/man7/)

# ---- the simulator ----

sim: $(SIM_BIN)

$(SIM_BIN): $(SIM_OBJ) $(NOLIBPQ_A)
	@mkdir -p $(@D)
	@echo "  LINK    $@ (no libpq: $(NOLIBPQ_A:build/lib/lib%.a=%))"
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $^ $(NOLIBPQ_LDLIBS)

# What the run file says it was built from (revision, tree hash, dirty,
# compiler, flags): sim/source-info.sh rewrites the header only when a
# value changes, so only buildinfo.o is compiled again.
build/sim/source_info.h: FORCE
	@sim/source-info.sh header $@ "$(CC)" "$(ALL_CFLAGS)"
build/obj/sim/buildinfo.o: build/sim/source_info.h
FORCE:

# Every named scenario and SIM_SCHEDULES random schedules from SIM_SEED;
# fails when the run FAILs (the run file says why).
# Applicable scenarios not simulated yet are listed (not_run) and the run
# file says FAIL, but only a failure of what ran fails the target
# (--incomplete-ok; trellara-chaos(1) BUGS lists what is not simulated).
sim-check: $(SIM_BIN)
	$(SIM_BIN) run --seed $(SIM_SEED) --schedules $(SIM_SCHEDULES) --incomplete-ok --format json --output $(SIM_RUN)
	@tests/sim/determinism.sh $(SIM_BIN)

# The deliberately broken variants: one binary per tests/mutants/NAME.patch,
# the patched file compiled in place of the original object (the archives'
# member is then never pulled in; a patched sim/ file's own object is left
# out of the link).  The simulator must catch each within
# the schedules make check runs, naming the invariant tests/mutants/NAME.expect
# gives.
MUTANTS := $(basename $(notdir $(wildcard tests/mutants/*.patch)))
MUTANT_BINS := $(MUTANTS:%=build/mutants/%/trellara-sim)
build/mutants/%/trellara-sim: tests/mutants/%.patch $(filter-out build/obj/sim/explore.o,$(SIM_OBJ)) sim/explore.c $(NOLIBPQ_A)
	@mkdir -p $(@D)
	$(if $(Q),@echo "  MUTANT  $*")
	$(Q)file=$$(sed -n '1s|^--- a/||p' $<); patch -s -o $(@D)/mutant.c $$file < $< && \
	$(CC) $(ALL_CFLAGS) -I$$(dirname $$file) -c $(@D)/mutant.c -o $(@D)/mutant.o && \
	$(CC) $(ALL_CFLAGS) -Isim '-DTRELLARA_SIM_VARIANT="$*"' -c sim/explore.c -o $(@D)/explore.o && \
	objs=$$(for o in $(filter-out build/obj/sim/explore.o,$(SIM_OBJ)); do [ "$$o" = "build/obj/$${file%.c}.o" ] || echo "$$o"; done) && \
	$(CC) $(ALL_CFLAGS) -o $@ $(@D)/mutant.o $(@D)/explore.o $$objs $(NOLIBPQ_A) $(NOLIBPQ_LDLIBS)

sim-variants: $(MUTANT_BINS)

sim-variants-check: $(MUTANT_BINS)
	@tests/sim/variants.sh $(SIM_VARIANT_SCHEDULES) $(MUTANTS)

sim-long: $(SIM_BIN)
	$(SIM_BIN) run --seed $(SIM_SEED) --schedules $(SCHEDULES) --progress 1000 --format json --output build/sim/run-long.json

# sim-check's run, then the report made from its run file.  A FAIL run
# still gets its report (it shows the failures), and the target fails.
correctness-report: $(SIM_BIN)
	@mkdir -p $(dir $(CORRECTNESS_REPORT))
	@status=0; \
	$(SIM_BIN) run --seed $(SIM_SEED) --schedules $(SIM_SCHEDULES) --incomplete-ok --format json --output $(SIM_RUN) || status=$$?; \
	if [ $$status -gt 1 ]; then exit $$status; fi; \
	$(SIM_BIN) report --input $(SIM_RUN) --output $(CORRECTNESS_REPORT) || exit $$?; \
	echo "wrote $(CORRECTNESS_REPORT) from $(SIM_RUN) (result $$(jq -r .result $(SIM_RUN)))"; \
	exit $$status

# The report's embedded tree hash must be the source's (sim/source-info.sh
# says which files are the source).
verify-correctness-report:
	@sim/verify-report.sh $(CORRECTNESS_REPORT)

bench: all $(BENCH_BINS)
	@scripts/bench.sh

# make soak HOURS=N (README "make soak"): scripts/soak.sh, its own clusters
HOURS ?= 0.1
.PHONY: soak
soak: all
	@SOAK_HOURS=$(HOURS) scripts/soak.sh

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)

# The README's first command: install what is missing, build, run the demo.
quickstart:
	@scripts/quickstart.sh

# stops what `make quickstart` left running and removes ./target/quickstart
.PHONY: quickstart-stop
quickstart-stop:
	@scripts/quickstart-stop.sh
