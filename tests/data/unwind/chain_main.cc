// The C++ chain's executable: main and eleven template instances into libpp_chain.so, with an
// object and exception tables in between.
#include <stdexcept>
#include <string>

extern "C" {
#include "chain.h"
}

namespace pp
{
template <int N> struct Chain {
	std::string tag;
	__attribute__((noinline)) int step(int x)
	{
		Chain<N - 1> next{tag};
		int r;
		try {
			r = next.step(x + 1);
		} catch (const std::exception &) {
			r = -1;
		}
		return r + static_cast<int>(next.tag.size());
	}
};
template <> struct Chain<0> {
	std::string tag;
	__attribute__((noinline)) int step(int x)
	{
		return pp_lib_00(x + 1) + static_cast<int>(tag.size());
	}
};
} // namespace pp

int main(int argc, char **)
{
	pp::Chain<10> c{std::string(static_cast<size_t>(argc), 'x')};
	return c.step(argc) == -12345;
}
