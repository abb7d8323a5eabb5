from filecheck import *  # noqa: F403
from filecheck import FInput, Matcher, Options, Parser, pattern_for_opts  # noqa: F401
