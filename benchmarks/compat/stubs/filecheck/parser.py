from filecheck import *  # noqa: F401,F403
from filecheck import Matcher, Options, Parser, FInput, pattern_for_opts  # noqa: F401
