# A thin wrapper for people who type make: the commands live in ./kvtier-dev
# (and the README).  Build directories are meson's; this file tracks nothing.
.PHONY: all run test clean

all:
	./kvtier-dev build

run:
	./kvtier-dev run

test:
	./kvtier-dev test

clean:
	rm -rf build build-release build-asan build-tsan build-fuzz build-ci-release build-logs
