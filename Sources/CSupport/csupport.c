#include "csupport.h"
