# A thin wrapper for people who type make: the commands live in ./kvtier-dev
# (and the README).  Build directories are meson's; this file tracks nothing.
.PHONY: all run test clean

all:
	./kvtier-dev build

run:
	./kvtier-dev run

test:
	./kvtier-dev test

# every build directory .gitignore names (build-deb/ and a TSan or fuzz tree too)
clean:
	rm -rf build build-*/ builddir
