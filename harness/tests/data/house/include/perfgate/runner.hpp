#pragma once
#include "perfgate/loader.hpp"
int measured();
