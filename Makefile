# Makefile for the queue extension (PGXS)

EXTENSION = queue
EXTVERSION = $(shell grep default_version $(EXTENSION).control | sed -e "s/default_version[[:space:]]*=[[:space:]]*'\([^']*\)'/\1/")

MODULE_big = queue
OBJS = $(patsubst %.c,%.o,$(wildcard src/*/*.c))

DATA = $(wildcard sql/$(EXTENSION)--*.sql)

# pg_regress files run in this order; each is independent of the others
# but shares the database, so names of queues are unique per file.
REGRESS = queues enqueue claim complete fail manage views errors security groups lease plans schedules ratelimit groupmax
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)

ISOLATION = $(patsubst specs/%.spec,%,$(sort $(wildcard specs/*.spec)))
ISOLATION_OPTS = --load-extension=$(EXTENSION)

PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter
PG_CPPFLAGS = -I$(srcdir)/src

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track header dependencies.
$(OBJS): $(wildcard src/*/*.h)

# Layers of src/, lowest first: a file may use only files of its own or
# lower layers, and no files may use each other in a loop (docs/design.md).
LAYERS = base shmem catalog storage xact ops worker module

check-layers: $(OBJS)
	tools/check-layers "$(LAYERS)" $(OBJS)

# Static analysis, not part of the build: make lint (needs cppcheck and
# clang-tidy).  The server's headers are checked by PostgreSQL, not here;
# clang-tidy's advice to use memset_s() and friends is off: glibc has none.
# Functions stay under 120 lines (readability-function-size).
PG_INCLUDE = $(shell $(PG_CONFIG) --includedir-server)
lint: check-layers
	tools/check-layers --self-test >/dev/null
	cppcheck --quiet --error-exitcode=1 --std=c11 -D__GNUC__ \
		--enable=warning,style,performance,portability --inline-suppr \
		--suppress='*:$(PG_INCLUDE)/*' --suppress=toomanyconfigs \
		-I $(PG_INCLUDE) -I src src/*/*.c
	clang-tidy --quiet --warnings-as-errors='*' \
		--config='{CheckOptions: [{key: readability-function-size.LineThreshold, value: 120}]}' \
		--checks=-clang-analyzer-security.insecureAPI.DeprecatedOrUnsafeBufferHandling,readability-function-size \
		src/*/*.c -- -I $(PG_INCLUDE) -I src

.PHONY: lint check-layers
