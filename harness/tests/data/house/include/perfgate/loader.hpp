#pragma once
int loaded();
